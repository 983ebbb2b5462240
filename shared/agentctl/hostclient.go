package agentctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl/pin"
)

// HostClient talks to an agentctl host daemon. Every call is bounded by its timeout.
type HostClient struct {
	base    string
	secret  string
	hc      *http.Client
	timeout time.Duration
}

// NewHostClient returns a client for an agentctl host at baseURL.
// timeout <= 0 means 30s (starting an instance waits for it to be healthy).
func NewHostClient(baseURL, secret string, timeout time.Duration) *HostClient {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &HostClient{base: strings.TrimRight(baseURL, "/"), secret: secret, hc: &http.Client{}, timeout: timeout}
}

// NewPinnedHostClient is NewHostClient for an `agentctl host -tls` whose
// certificate has the given fingerprint ("" is NewHostClient).
func NewPinnedHostClient(baseURL, secret, fingerprint string, timeout time.Duration) *HostClient {
	c := NewHostClient(baseURL, secret, timeout)
	if fingerprint != "" {
		c.hc = &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: pin.ClientConfig(fingerprint)}}
	}
	return c
}

func (c *HostClient) do(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("agentctl host %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("agentctl host %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	return decodeResponse(resp, out)
}

// Health calls GET /v1/health on the host.
func (c *HostClient) Health(ctx context.Context) error {
	return c.do(ctx, "GET", "/v1/health", nil, nil)
}

// CreateInstance calls POST /v1/instances.
func (c *HostClient) CreateInstance(ctx context.Context, sessionID string) (Instance, error) {
	var v Instance
	return v, c.do(ctx, "POST", "/v1/instances", CreateInstanceRequest{SessionID: sessionID}, &v)
}

// CreateInstanceWithSecret calls POST /v1/instances with a caller-chosen
// instance secret (see Host.CreateWithSecret).
func (c *HostClient) CreateInstanceWithSecret(ctx context.Context, sessionID, secret string) (Instance, error) {
	var v Instance
	return v, c.do(ctx, "POST", "/v1/instances", CreateInstanceRequest{SessionID: sessionID, Secret: secret}, &v)
}

// CreateInstanceFrom calls POST /v1/instances with a whole request body
// (secret and terminal settings; see Host.CreateInstance).
func (c *HostClient) CreateInstanceFrom(ctx context.Context, req CreateInstanceRequest) (Instance, error) {
	var v Instance
	return v, c.do(ctx, "POST", "/v1/instances", req, &v)
}

// Instances calls GET /v1/instances.
func (c *HostClient) Instances(ctx context.Context) ([]Instance, error) {
	var v struct {
		Instances []Instance `json:"instances"`
	}
	return v.Instances, c.do(ctx, "GET", "/v1/instances", nil, &v)
}

// DeleteInstance calls DELETE /v1/instances/{session_id}.
func (c *HostClient) DeleteInstance(ctx context.Context, sessionID string) error {
	return c.do(ctx, "DELETE", "/v1/instances/"+url.PathEscape(sessionID), nil, nil)
}

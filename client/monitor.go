package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// MonitorOptions select what Monitor streams.
type MonitorOptions struct {
	// LogLevel is trace, debug, info, warn or error ("" for the server's
	// default, info).
	LogLevel string
	// JSON asks for JSON lines instead of text.
	JSON bool
}

// Monitor streams the log lines of the node this Client talks to (GET
// /v1/monitor; never forwarded) until ctx ends or the caller closes the
// returned body. The per-call timeout does not apply to a stream.
func (c *Client) Monitor(ctx context.Context, o MonitorOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.LogLevel != "" {
		q.Set("log_level", o.LogLevel)
	}
	if o.JSON {
		q.Set("log_json", strconv.FormatBool(true))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint("/v1/monitor", q).String(), nil)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/monitor: %w", err)
	}
	req.Header.Set("Accept", "text/plain")
	c.authorize(req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(request{method: http.MethodGet, path: "/v1/monitor"}, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeAPIError(resp)
	}
	return resp.Body, nil
}

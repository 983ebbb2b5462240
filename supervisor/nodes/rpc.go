package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/plugins"
)

// The node-to-node runtime protocol: POST /v1/internal/runtimes/{name}/{op}
// with a JSON body per op; 200 with the result, or an error body whose code
// names the runtime's sentinel error. GET /v1/internal/plugins lists the
// node's plugins. Both take the node secret.
const (
	opCapabilities = "capabilities"
	opLaunch       = "launch"
	opRecover      = "recover"
	opInspect      = "inspect"
	opStop         = "stop"
	opDestroy      = "destroy"
)

type handleBody struct {
	Handle []byte `json:"handle"`
	Secret string `json:"secret,omitempty"`
	// TimeoutMS bounds a stop (milliseconds).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// codes name the runtime's sentinel errors on the wire.
var codes = []struct {
	code string
	err  error
}{
	{"not_found", runtime.ErrNotFound},
	{"unavailable", runtime.ErrUnavailable},
	{"invalid_request", runtime.ErrInvalidRequest},
	{"invalid_config", runtime.ErrInvalidConfig},
	{"unsupported", runtime.ErrUnsupported},
}

// ServeRuntime runs one runtime call in this node's plugin name (the server
// side of remoteRuntime). The route authenticates the calling node.
func ServeRuntime(w http.ResponseWriter, r *http.Request, p Plugins, name, op string) {
	rt, err := p.Get(name)
	if err != nil {
		writeErr(w, err)
		return
	}
	var in handleBody
	var out any
	ctx := r.Context()
	switch op {
	case opCapabilities:
		out, err = rt.Capabilities(ctx)
	case opLaunch:
		var req runtime.LaunchRequest
		if err = json.NewDecoder(r.Body).Decode(&req); err != nil {
			err = fmt.Errorf("%w: launch request: %v", runtime.ErrInvalidRequest, err)
			break
		}
		out, err = rt.Launch(ctx, req)
	case opRecover, opInspect, opStop, opDestroy:
		if err = json.NewDecoder(r.Body).Decode(&in); err != nil {
			err = fmt.Errorf("%w: %s request: %v", runtime.ErrInvalidRequest, op, err)
			break
		}
		switch op {
		case opRecover:
			out, err = rt.Recover(ctx, in.Handle, in.Secret)
		case opInspect:
			out, err = rt.Inspect(ctx, in.Handle)
		case opStop:
			err = rt.Stop(ctx, in.Handle, time.Duration(in.TimeoutMS)*time.Millisecond)
			out = struct{}{}
		case opDestroy:
			err = rt.Destroy(ctx, in.Handle)
			out = struct{}{}
		}
	default:
		err = fmt.Errorf("%w: unknown runtime operation %q", runtime.ErrInvalidRequest, op)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// ProbeAnswer is a node's answer to the leader's probe: its plugins and
// its session cap.
type ProbeAnswer struct {
	Plugins     []plugins.Status `json:"plugins"`
	MaxSessions int              `json:"max_sessions,omitempty"`
}

// ServePlugins answers Watch's probe with this node's plugins and its
// limits.max_sessions_per_node.
func ServePlugins(w http.ResponseWriter, p Plugins, maxSessions int) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ProbeAnswer{Plugins: p.List(), MaxSessions: maxSessions})
}

func writeErr(w http.ResponseWriter, err error) {
	var b errorBody
	b.Error.Code, b.Error.Message = "internal", err.Error()
	status := http.StatusInternalServerError
	for _, c := range codes {
		if errors.Is(err, c.err) {
			b.Error.Code, status = c.code, http.StatusUnprocessableEntity
			break
		}
	}
	if errors.Is(err, plugins.ErrUnhealthy) || errors.Is(err, plugins.ErrUnknownRuntime) {
		b.Error.Code, status = "unavailable", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}

// rpcClient makes node-to-node calls, over HTTPS with this node's server
// certificate when the cluster runs TLS.
type rpcClient struct {
	secret string
	scheme string
	tls    *certs.TLS
	http   *http.Client
}

func newRPCClient(secret string, t *certs.TLS) *rpcClient {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}
	c := &rpcClient{secret: secret, scheme: "http", http: &http.Client{Transport: tr}}
	if t != nil {
		tr.TLSClientConfig = t.PeerConfig("")
		c.scheme, c.tls = "https", t
	}
	return c
}

// checkPeer refuses an answer from another server than node when
// tls.verify_server_hostname asks for node identities (the connection has
// already checked that the peer is a server of the cluster's CA).
func (c *rpcClient) checkPeer(node string, resp *http.Response) error {
	if c.tls == nil || !c.tls.Options().VerifyServerHostname {
		return nil
	}
	if got := certs.DialedNode(resp.TLS); got != node {
		return fmt.Errorf("node %s answered with server %q's certificate", node, got)
	}
	return nil
}

// call posts in to addr's path and decodes the answer into out. A node that
// cannot be reached, or does not answer in time, is ErrNodeUnavailable.
func (c *rpcClient) call(ctx context.Context, node, addr, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, body)
	if err != nil {
		return err
	}
	if c.secret != "" {
		req.Header.Set(cluster.NodeSecretHeader, c.secret)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return errors.Join(ErrNodeUnavailable, fmt.Errorf("node %s at %s: %w", node, addr, err))
	}
	defer resp.Body.Close()
	if err := c.checkPeer(node, resp); err != nil {
		return errors.Join(ErrNodeUnavailable, err)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return errors.Join(ErrNodeUnavailable, fmt.Errorf("node %s at %s: %w", node, addr, err))
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			return fmt.Errorf("node %s: %s: %s", node, resp.Status, bytes.TrimSpace(data))
		}
		for _, c := range codes {
			if c.code == e.Error.Code {
				return fmt.Errorf("node %s: %s: %w", node, e.Error.Message, c.err)
			}
		}
		return fmt.Errorf("node %s: %s", node, e.Error.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

func (c *rpcClient) probe(ctx context.Context, node, addr string) (ProbeAnswer, error) {
	var out ProbeAnswer
	err := c.call(ctx, node, addr, http.MethodGet, "/v1/internal/plugins", nil, &out)
	return out, err
}

// remoteRuntime runs runtime calls in another node's plugin.
type remoteRuntime struct {
	rpc              *rpcClient
	node, addr, name string
}

var _ runtime.Runtime = (*remoteRuntime)(nil)

func (r *remoteRuntime) do(ctx context.Context, op string, in, out any) error {
	return r.rpc.call(ctx, r.node, r.addr, http.MethodPost, "/v1/internal/runtimes/"+r.name+"/"+op, in, out)
}

// errLocalOnly is returned for the calls a host makes only of its own plugins.
var errLocalOnly = fmt.Errorf("%w: only the node's own server configures its plugins", runtime.ErrUnsupported)

func (r *remoteRuntime) Info(context.Context) (runtime.Info, error) {
	return runtime.Info{}, errLocalOnly
}
func (r *remoteRuntime) ConfigSchema(context.Context) (runtime.Schema, error) {
	return runtime.Schema{}, errLocalOnly
}
func (r *remoteRuntime) SetConfig(context.Context, runtime.ConfigSource) (hcl.Diagnostics, error) {
	return nil, errLocalOnly
}

func (r *remoteRuntime) Capabilities(ctx context.Context) (runtime.Capabilities, error) {
	var out runtime.Capabilities
	err := r.do(ctx, opCapabilities, struct{}{}, &out)
	return out, err
}

func (r *remoteRuntime) Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	var out runtime.LaunchResponse
	err := r.do(ctx, opLaunch, req, &out)
	return out, err
}

func (r *remoteRuntime) Recover(ctx context.Context, handle []byte, secret string) (runtime.LaunchResponse, error) {
	var out runtime.LaunchResponse
	err := r.do(ctx, opRecover, handleBody{Handle: handle, Secret: secret}, &out)
	return out, err
}

func (r *remoteRuntime) Inspect(ctx context.Context, handle []byte) (runtime.InspectResponse, error) {
	var out runtime.InspectResponse
	err := r.do(ctx, opInspect, handleBody{Handle: handle}, &out)
	return out, err
}

func (r *remoteRuntime) Stop(ctx context.Context, handle []byte, timeout time.Duration) error {
	return r.do(ctx, opStop, handleBody{Handle: handle, TimeoutMS: timeout.Milliseconds()}, nil)
}

func (r *remoteRuntime) Destroy(ctx context.Context, handle []byte) error {
	return r.do(ctx, opDestroy, handleBody{Handle: handle}, nil)
}

func sortHealth(hs []Health) {
	sort.Slice(hs, func(i, j int) bool { return hs[i].Node < hs[j].Node })
}

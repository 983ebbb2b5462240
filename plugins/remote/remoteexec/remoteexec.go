// Package remoteexec is the remote runtime: each session's agentctl is a
// `serve` instance on another machine, started and stopped through that
// machine's `agentctl host` daemon (shared/agentctl's host API). The plugin
// keeps no state of its own: the handle names the host (by its configured
// name), the session, and the instance's URL and boot nonce.
//
// Secrets: the host API secret is read from each host's secret_file and never
// leaves the plugin (not in handles, not in logs). The agentctl secret is the
// one the supervisor chose for the session (LaunchRequest.AgentctlSecret): the
// plugin asks the host to start the instance with it (POST /v1/instances
// {"session_id","secret"}), so the supervisor talks to remote and local
// executors alike. A host that ignores the requested secret is refused.
//
// It imports only shared/, never supervisor/.
package remoteexec

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/pluginbase"
)

// Name and Version identify the plugin.
const (
	Name    = "remote"
	Version = "0.1.0"
)

// OptionHost is the launch option (runtime_options.host) naming the host.
const OptionHost = "host"

const (
	// createTimeout bounds asking a host for an instance (the host waits up
	// to 15s for it to start).
	createTimeout = 45 * time.Second
	// deleteSlack is added to Stop's timeout for the host's own wait.
	deleteSlack = 15 * time.Second
)

// Runtime implements runtime.Runtime for agentctl host daemons.
type Runtime struct {
	*pluginbase.Base[Config]
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns an unconfigured remote runtime; every executor operation fails
// with runtime.ErrInvalidConfig until SetConfig accepts a configuration (a
// refused one leaves the previous one in force).
func New(logger hclog.Logger) *Runtime {
	return &Runtime{Base: pluginbase.New(pluginbase.Options[Config]{
		Info: runtime.Info{Name: Name, Version: Version}, Spec: spec, Defaults: defaults, Logger: logger,
		LogFields: func(c Config) []any {
			names := make([]string, len(c.Hosts))
			for i, h := range c.Hosts {
				names[i] = h.Name + "=" + h.URL
			}
			return []any{"hosts", strings.Join(names, ","), "reconnect_attempts", c.Reconnect.Attempts,
				"reconnect_initial", c.Reconnect.Initial, "reconnect_max", c.Reconnect.Max}
		},
	})}
}

func (r *Runtime) config() (Config, error) {
	cfg, set := r.Config()
	if !set {
		return Config{}, fmt.Errorf("the remote runtime has no configuration (it needs at least one host block): %w", runtime.ErrInvalidConfig)
	}
	return cfg, nil
}

// Capabilities implements runtime.Runtime.
func (r *Runtime) Capabilities(context.Context) (runtime.Capabilities, error) {
	return runtime.Capabilities{SupportsWorkspaceOnly: true, SurvivesSupervisorRestart: true, NodeLocal: false}, nil
}

// handle is what the supervisor stores for an executor. It holds no secret.
type handle struct {
	V         int    `json:"v"`
	Host      string `json:"host"`
	SessionID string `json:"session_id"`
	URL       string `json:"url"`
	Nonce     string `json:"nonce"`
	PID       int    `json:"pid,omitempty"`       // on the remote machine
	Workspace string `json:"workspace,omitempty"` // on the remote machine
	// Fingerprint is the instance's certificate fingerprint when the host
	// starts instances with TLS.
	Fingerprint string `json:"fingerprint,omitempty"`
}

const handleVersion = 1

// decodeHandle decodes and checks a handle; anything unusable is ErrNotFound.
func decodeHandle(b []byte) (handle, error) {
	var h handle
	if len(b) == 0 {
		return h, fmt.Errorf("handle is empty: %w", runtime.ErrInvalidRequest)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("decode handle: %v: %w", err, runtime.ErrNotFound)
	}
	if h.V != handleVersion || !runtime.ValidID(h.Host) || !runtime.ValidID(h.SessionID) || h.Nonce == "" {
		return h, fmt.Errorf("handle is not a remote executor handle: %w", runtime.ErrNotFound)
	}
	if _, err := validURL(h.URL); err != nil {
		return h, fmt.Errorf("handle url: %v: %w", err, runtime.ErrNotFound)
	}
	return h, nil
}

func (h handle) response() runtime.LaunchResponse {
	b, _ := json.Marshal(h)
	// PID stays 0: the pid is on another machine and means nothing locally.
	return runtime.LaunchResponse{Handle: b, AgentctlURL: h.URL, Nonce: h.Nonce, WorkspacePath: h.Workspace, AgentctlFingerprint: h.Fingerprint}
}

// hostFor resolves the handle's host in the current configuration.
func hostFor(cfg Config, h handle) (Host, error) {
	host, ok := cfg.host(h.Host)
	if !ok {
		return Host{}, fmt.Errorf("host %q of session %s is not configured any more: %w", h.Host, h.SessionID, runtime.ErrNotFound)
	}
	return host, nil
}

// hostError maps a host API failure onto the SDK's typed errors.
func hostError(host Host, op string, err error) error {
	var api *agentctl.APIError
	if !errors.As(err, &api) {
		return fmt.Errorf("agentctl host %q (%s) %s: %v: %w", host.Name, host.URL, op, err, runtime.ErrUnavailable)
	}
	msg := fmt.Sprintf("agentctl host %q (%s) %s: %s", host.Name, host.URL, op, api.Message)
	switch {
	case api.Status == http.StatusUnauthorized:
		return fmt.Errorf("%s (check secret_file %s): %w", msg, host.SecretFile, runtime.ErrInvalidConfig)
	case api.Status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", msg, runtime.ErrNotFound)
	case api.Status == http.StatusBadRequest:
		return fmt.Errorf("%s: %w", msg, runtime.ErrInvalidRequest)
	case api.Status >= 500:
		return fmt.Errorf("%s: %w", msg, runtime.ErrUnavailable)
	}
	return errors.New(msg)
}

func isConflict(err error) bool {
	var api *agentctl.APIError
	return errors.As(err, &api) && api.Status == http.StatusConflict
}

func isNotFound(err error) bool {
	var api *agentctl.APIError
	return errors.As(err, &api) && api.Status == http.StatusNotFound
}

// pickHost resolves runtime_options.host, or the first healthy host.
func (r *Runtime) pickHost(ctx context.Context, cfg Config, name string) (Host, error) {
	if name != "" {
		host, ok := cfg.host(name)
		if !ok {
			names := make([]string, len(cfg.Hosts))
			for i, h := range cfg.Hosts {
				names[i] = h.Name
			}
			return Host{}, fmt.Errorf("runtime_options.host %q is not a configured host (have: %s): %w", name, strings.Join(names, ", "), runtime.ErrInvalidRequest)
		}
		if err := agentctl.NewPinnedHostClient(host.URL, host.Secret, host.Fingerprint, cfg.Reconnect.Timeout).Health(ctx); err != nil {
			return Host{}, hostError(host, "health", err)
		}
		return host, nil
	}
	errs := make([]error, len(cfg.Hosts))
	var wg sync.WaitGroup
	for i, host := range cfg.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = agentctl.NewPinnedHostClient(host.URL, host.Secret, host.Fingerprint, cfg.Reconnect.Timeout).Health(ctx)
		}()
	}
	wg.Wait()
	var msgs []string
	for i, err := range errs {
		if err == nil {
			return cfg.Hosts[i], nil
		}
		msgs = append(msgs, fmt.Sprintf("%s: %v", cfg.Hosts[i].Name, err))
	}
	return Host{}, fmt.Errorf("no healthy agentctl host (%s): %w", strings.Join(msgs, "; "), runtime.ErrUnavailable)
}

// Launch implements runtime.Runtime: pick the host, ask it for a serve
// instance running with the supervisor's secret (replacing an earlier
// instance of the session), then check the instance's health, boot nonce,
// capabilities and fencing token.
func (r *Runtime) Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	if err := req.Validate(); err != nil {
		return runtime.LaunchResponse{}, err
	}
	for k := range req.Options {
		if k != OptionHost && !runtime.IsHostOption(k) {
			return runtime.LaunchResponse{}, fmt.Errorf("unknown runtime option %q (the remote runtime knows %q): %w", k, OptionHost, runtime.ErrInvalidRequest)
		}
	}
	cfg, err := r.config()
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	host, err := r.pickHost(ctx, cfg, req.Options[OptionHost])
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	defer r.Sessions.Lock(req.SessionID)()
	if req.Workspace.Path != "" {
		r.Logger().Debug("the task workspace is not used: remote sessions work in the host's workspace", "session_id", req.SessionID, "workspace", req.Workspace.Path)
	}
	hc := agentctl.NewPinnedHostClient(host.URL, host.Secret, host.Fingerprint, createTimeout)
	create := agentctl.CreateInstanceRequest{SessionID: req.SessionID, Secret: req.AgentctlSecret, Terminal: instanceTerminal(req.Terminal)}
	inst, err := hc.CreateInstanceFrom(ctx, create)
	if isConflict(err) {
		// An instance of an earlier launch still runs: replace it.
		r.Logger().Info("replacing the running instance of an earlier launch", "host", host.Name, "session_id", req.SessionID)
		if derr := hc.DeleteInstance(ctx, req.SessionID); derr != nil && !isNotFound(derr) {
			return runtime.LaunchResponse{}, hostError(host, "delete earlier instance", derr)
		}
		inst, err = hc.CreateInstanceFrom(ctx, create)
	}
	if err != nil {
		return runtime.LaunchResponse{}, hostError(host, "create instance", err)
	}
	h := handle{V: handleVersion, Host: host.Name, SessionID: req.SessionID, URL: inst.URL, Nonce: inst.Nonce, PID: inst.PID, Workspace: inst.Workspace, Fingerprint: inst.Fingerprint}
	if err := r.checkInstance(ctx, cfg, host, inst, req); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteSlack)
		defer cancel()
		if derr := hc.DeleteInstance(dctx, req.SessionID); derr != nil && !isNotFound(derr) {
			r.Logger().Warn("could not remove the failed instance", "host", host.Name, "session_id", req.SessionID, "error", derr)
		}
		return runtime.LaunchResponse{}, err
	}
	r.Logger().Info("launched remote agentctl", "host", host.Name, "session_id", h.SessionID, "url", h.URL, "nonce", h.Nonce, "remote_pid", h.PID)
	return h.response(), nil
}

// instanceTerminal is the host API's form of a launch's terminal settings
// (nil when they are all defaults, so older hosts still accept the request).
func instanceTerminal(t runtime.Terminal) *agentctl.InstanceTerminal {
	if t.IsZero() {
		return nil
	}
	ms := t.IdleTimeout.Milliseconds()
	if t.IdleTimeout > 0 && ms == 0 {
		ms = 1 // a set sub-millisecond timeout stays set
	}
	return &agentctl.InstanceTerminal{Shell: t.Shell, ReplayBytes: t.ReplayBytes, IdleTimeoutMS: ms}
}

// checkInstance verifies a new instance: it runs with the requested secret,
// answers health for the session with the nonce the host reported, supports
// workspace-only mode, and has seen the request's fencing token.
func (r *Runtime) checkInstance(ctx context.Context, cfg Config, host Host, inst agentctl.Instance, req runtime.LaunchRequest) error {
	if subtle.ConstantTimeCompare([]byte(inst.Secret), []byte(req.AgentctlSecret)) != 1 {
		return fmt.Errorf("agentctl host %q started the instance with a secret of its own instead of the supervisor's (is its agentctl older than the remote runtime?): %w", host.Name, runtime.ErrUnavailable)
	}
	if _, err := validURL(inst.URL); err != nil {
		return fmt.Errorf("agentctl host %q reported instance url: %v: %w", host.Name, err, runtime.ErrUnavailable)
	}
	if strings.HasPrefix(inst.URL, "https://") != (inst.Fingerprint != "") {
		return fmt.Errorf("agentctl host %q reported instance url %s with fingerprint %q: an https instance needs its certificate's fingerprint: %w", host.Name, inst.URL, inst.Fingerprint, runtime.ErrUnavailable)
	}
	ac := agentctl.NewPinnedClient(inst.URL, req.AgentctlSecret, inst.Fingerprint, cfg.Reconnect.Timeout)
	hl, err := ac.Health(ctx)
	if err != nil {
		return fmt.Errorf("agentctl of session %s on host %q (%s) is not healthy: %v: %w", req.SessionID, host.Name, inst.URL, err, runtime.ErrUnavailable)
	}
	if hl.SessionID != req.SessionID || hl.Nonce != inst.Nonce {
		return fmt.Errorf("agentctl at %s answers for session %q nonce %q, want session %q nonce %q: %w", inst.URL, hl.SessionID, hl.Nonce, req.SessionID, inst.Nonce, runtime.ErrUnavailable)
	}
	caps, err := ac.Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("agentctl capabilities of session %s on host %q: %v: %w", req.SessionID, host.Name, err, runtime.ErrUnavailable)
	}
	if !caps.SupportsWorkspaceOnly {
		return fmt.Errorf("agentctl on host %q does not support workspace-only mode: %w", host.Name, runtime.ErrUnavailable)
	}
	if req.FencingToken > 0 {
		ac.SetFencingToken(req.FencingToken)
		if _, err := ac.Fence(ctx); err != nil {
			return fmt.Errorf("present fencing token %d to agentctl of session %s: %w", req.FencingToken, req.SessionID, err)
		}
	}
	return nil
}

// probeResult is what one recover attempt observed.
type probeResult int

const (
	probeOK          probeResult = iota
	probeGone                    // the host answers and has no such instance
	probeDown                    // the host lists the instance but it does not answer
	probeUnreachable             // neither agentctl nor the host answered
)

// Recover implements runtime.Runtime: health-check the recorded URL, and
// when that fails ask the host, retrying with the configured backoff. A host
// that no longer has the instance means ErrNotFound at once; one that lists
// it under a new nonce (restarted) is reported with that nonce; a host that
// stays unreachable for every attempt means ErrUnavailable.
func (r *Runtime) Recover(ctx context.Context, b []byte, secret string) (runtime.LaunchResponse, error) {
	h, err := decodeHandle(b)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if secret == "" {
		return runtime.LaunchResponse{}, fmt.Errorf("agentctl_secret is empty: %w", runtime.ErrInvalidRequest)
	}
	cfg, err := r.config()
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	host, err := hostFor(cfg, h)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	defer r.Sessions.Lock(h.SessionID)()
	rc := cfg.Reconnect
	wait := rc.Initial
	begun := time.Now()
	var result probeResult
	for attempt := 1; ; attempt++ {
		var nh handle
		nh, result, err = r.probe(ctx, cfg, host, h, secret)
		switch result {
		case probeOK:
			if nh.Nonce != h.Nonce {
				r.Logger().Info("agentctl restarted since the handle was written", "host", host.Name, "session_id", h.SessionID, "old_nonce", h.Nonce, "nonce", nh.Nonce)
			}
			r.Logger().Info("recovered remote agentctl", "host", host.Name, "session_id", h.SessionID, "url", nh.URL, "attempt", attempt)
			return nh.response(), nil
		case probeGone:
			return runtime.LaunchResponse{}, fmt.Errorf("session %s on host %q: %v: %w", h.SessionID, host.Name, err, runtime.ErrNotFound)
		}
		r.Logger().Warn("recover attempt failed", "host", host.Name, "session_id", h.SessionID, "attempt", attempt, "of", rc.Attempts, "error", err)
		if attempt >= rc.Attempts {
			break
		}
		select {
		case <-ctx.Done():
			return runtime.LaunchResponse{}, fmt.Errorf("recover session %s on host %q: %w (last: %v)", h.SessionID, host.Name, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, rc.Max)
	}
	if result == probeDown {
		return runtime.LaunchResponse{}, fmt.Errorf("session %s on host %q: the host lists its agentctl but it did not answer in %d attempts over %s: %v: %w",
			h.SessionID, host.Name, rc.Attempts, time.Since(begun).Round(time.Millisecond), err, runtime.ErrNotFound)
	}
	return runtime.LaunchResponse{}, fmt.Errorf("session %s: host %q (%s) and agentctl %s unreachable after %d attempts over %s: %v: %w",
		h.SessionID, host.Name, host.URL, h.URL, rc.Attempts, time.Since(begun).Round(time.Millisecond), err, runtime.ErrUnavailable)
}

// probe is one recover attempt.
func (r *Runtime) probe(ctx context.Context, cfg Config, host Host, h handle, secret string) (handle, probeResult, error) {
	timeout := cfg.Reconnect.Timeout
	hl, err := agentctl.NewPinnedClient(h.URL, secret, h.Fingerprint, timeout).Health(ctx)
	if err == nil && hl.SessionID == h.SessionID {
		h.Nonce = hl.Nonce
		return h, probeOK, nil
	}
	agentErr := err
	if err == nil {
		agentErr = fmt.Errorf("%s answers for session %q", h.URL, hl.SessionID)
	}
	// The recorded URL does not answer for the session: ask the host.
	insts, err := agentctl.NewPinnedHostClient(host.URL, host.Secret, host.Fingerprint, hostListTimeout(cfg)).Instances(ctx)
	if err != nil {
		var api *agentctl.APIError
		if errors.As(err, &api) && api.Status == http.StatusUnauthorized {
			return h, probeUnreachable, fmt.Errorf("agentctl: %v; host refused secret_file %s: %v", agentErr, host.SecretFile, err)
		}
		return h, probeUnreachable, fmt.Errorf("agentctl: %v; host: %v", agentErr, err)
	}
	for _, inst := range insts {
		if inst.SessionID != h.SessionID {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(inst.Secret), []byte(secret)) != 1 {
			return h, probeGone, errors.New("the host's instance runs with another secret than the session's")
		}
		if !inst.Healthy {
			return h, probeDown, fmt.Errorf("agentctl: %v; the host lists the instance (pid %d) as not healthy", agentErr, inst.PID)
		}
		nh := h
		nh.URL, nh.Nonce, nh.PID, nh.Workspace, nh.Fingerprint = inst.URL, inst.Nonce, inst.PID, inst.Workspace, inst.Fingerprint
		if _, err := validURL(nh.URL); err != nil {
			return h, probeDown, fmt.Errorf("the host reports instance url: %v", err)
		}
		hl, err := agentctl.NewPinnedClient(nh.URL, secret, nh.Fingerprint, timeout).Health(ctx)
		if err != nil || hl.SessionID != h.SessionID {
			return h, probeDown, fmt.Errorf("the host lists the instance at %s but it does not answer for the session: %v", nh.URL, err)
		}
		nh.Nonce = hl.Nonce
		return nh, probeOK, nil
	}
	return h, probeGone, errors.New("the host has no instance for it (stopped or destroyed)")
}

// hostListTimeout bounds GET /v1/instances, which health-checks every
// instance (2s each, in parallel) before answering.
func hostListTimeout(cfg Config) time.Duration { return cfg.Reconnect.Timeout + 3*time.Second }

// Inspect implements runtime.Runtime from the host's instance list (Inspect
// has no agentctl secret). An unreachable host is StateUnknown.
func (r *Runtime) Inspect(ctx context.Context, b []byte) (runtime.InspectResponse, error) {
	h, err := decodeHandle(b)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	cfg, err := r.config()
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	host, err := hostFor(cfg, h)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	details := map[string]string{"host": host.Name, "host_url": host.URL, "session_id": h.SessionID, "nonce": h.Nonce}
	if h.Workspace != "" {
		details["workspace"] = h.Workspace
	}
	resp := runtime.InspectResponse{State: runtime.StateUnknown, AgentctlURL: h.URL, Details: details}
	insts, err := agentctl.NewPinnedHostClient(host.URL, host.Secret, host.Fingerprint, hostListTimeout(cfg)).Instances(ctx)
	if err != nil {
		resp.Message = hostError(host, "list instances", err).Error()
		return resp, nil
	}
	for _, inst := range insts {
		if inst.SessionID != h.SessionID {
			continue
		}
		resp.AgentctlURL = inst.URL
		details["remote_pid"] = fmt.Sprint(inst.PID)
		details["nonce"] = inst.Nonce
		switch {
		case !inst.Healthy:
			resp.State, resp.Message = runtime.StateExited, "the host lists the instance but it does not answer"
		case inst.Nonce != h.Nonce:
			resp.State, resp.Message = runtime.StateRunning, fmt.Sprintf("agentctl restarted (nonce %s, handle has %s)", inst.Nonce, h.Nonce)
		default:
			resp.State, resp.Message = runtime.StateRunning, "running on host "+host.Name
		}
		return resp, nil
	}
	resp.State, resp.Message = runtime.StateExited, "the host has no instance for the session"
	return resp, nil
}

// Stop implements runtime.Runtime: the host stops the instance (SIGTERM,
// SIGKILL after its own 10s) and forgets it; the workspace stays on the host
// and a later Launch of the session reuses it.
func (r *Runtime) Stop(ctx context.Context, b []byte, timeout time.Duration) error {
	h, err := decodeHandle(b)
	if err != nil {
		return err
	}
	return r.deleteInstance(ctx, h, timeout+deleteSlack, "stop")
}

// Destroy implements runtime.Runtime. The host API has no call to remove a
// workspace, so the session's workspace directory stays on the host
// (ROOT/workspaces/SESSION); everything else is gone.
func (r *Runtime) Destroy(ctx context.Context, b []byte) error {
	h, err := decodeHandle(b)
	if err != nil {
		return err
	}
	return r.deleteInstance(ctx, h, deleteSlack, "destroy")
}

func (r *Runtime) deleteInstance(ctx context.Context, h handle, timeout time.Duration, op string) error {
	cfg, err := r.config()
	if err != nil {
		return err
	}
	host, err := hostFor(cfg, h)
	if err != nil {
		return err
	}
	defer r.Sessions.Lock(h.SessionID)()
	err = agentctl.NewPinnedHostClient(host.URL, host.Secret, host.Fingerprint, timeout).DeleteInstance(ctx, h.SessionID)
	switch {
	case err == nil:
		r.Logger().Info("remote agentctl "+op, "host", host.Name, "session_id", h.SessionID)
		return nil
	case isNotFound(err):
		return nil
	}
	return hostError(host, op, err)
}

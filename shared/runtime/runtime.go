package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// APIVersion is the runtime plugin API version this SDK speaks. A plugin built
// with this SDK reports it from Info unless it chooses otherwise.
const APIVersion = "1"

// SupportedAPIVersions are the plugin API versions a host built with this SDK
// accepts by default.
var SupportedAPIVersions = []string{APIVersion}

// PluginName is the key of the runtime plugin in go-plugin's plugin map.
const PluginName = "runtime"

// Runtime is the contract every runtime plugin implements. The host sees the
// same interface on its side of the process boundary.
type Runtime interface {
	// Info names the plugin, its version and the plugin API version it speaks.
	Info(ctx context.Context) (Info, error)
	// ConfigSchema describes the attributes and blocks of the plugin's
	// `config { … }` body, for documentation and listing.
	ConfigSchema(ctx context.Context) (Schema, error)
	// SetConfig hands the plugin its `config { … }` body. The plugin parses
	// Source with hclsyntax.ParseConfig(Source, Filename, Start) so that its
	// diagnostics carry true file ranges. An empty Source means no config
	// block; the plugin applies its defaults. Diagnostics with errors mean the
	// configuration was refused and the previous one (if any) stays in force.
	SetConfig(ctx context.Context, src ConfigSource) (hcl.Diagnostics, error)
	// Capabilities reports what executors of this runtime can do.
	Capabilities(ctx context.Context) (Capabilities, error)
	// Launch starts an executor (agentctl) for a session and returns an
	// opaque handle plus the agentctl endpoint.
	Launch(ctx context.Context, req LaunchRequest) (LaunchResponse, error)
	// Recover reattaches to (or restarts) the executor a handle names. It
	// returns ErrNotFound when the executor can no longer be recovered.
	// A new leader does not call it for an executor whose agentctl answers
	// as recorded, so Inspect, Stop and Destroy must work from the handle
	// alone, also for an executor this plugin process never launched or
	// recovered.
	Recover(ctx context.Context, handle []byte, secret string) (LaunchResponse, error)
	// Inspect reports the executor's state without changing it.
	Inspect(ctx context.Context, handle []byte) (InspectResponse, error)
	// Stop stops the executor's agentctl, waiting at most timeout before
	// killing it. The workspace stays. Stopping a stopped executor is no error.
	Stop(ctx context.Context, handle []byte, timeout time.Duration) error
	// Destroy stops the executor and removes everything the runtime created
	// for it. Destroying a destroyed executor is no error.
	Destroy(ctx context.Context, handle []byte) error
}

// Info identifies a plugin.
type Info struct {
	Name       string
	Version    string
	APIVersion string
}

// ConfigSource is a plugin's `config { … }` body as it appears in a file.
type ConfigSource struct {
	// Filename is the file the body comes from, used in diagnostics. The
	// supervisor sends an absolute path when the body comes from a real
	// file, so that Path can resolve relative paths against it.
	Filename string
	// Source is the body's text, without the surrounding braces.
	Source []byte
	// Start is the position of Source's first byte in Filename.
	Start hcl.Pos
}

// Path resolves a path written in the body: a relative path is relative to
// the directory of the file it was written in (as the supervisor resolves
// its own data_dir and plugin_dir) when Filename is an absolute path, and
// is returned as written otherwise (a built-in config such as the dev
// server's, resolved against the working directory by the caller). A
// plugin calls it for each path-valued attribute the file sets, not for
// its defaults.
func (s ConfigSource) Path(p string) string {
	if p == "" || filepath.IsAbs(p) || !filepath.IsAbs(s.Filename) {
		return p
	}
	return filepath.Join(filepath.Dir(s.Filename), p)
}

// Schema describes a plugin's configuration body.
type Schema struct {
	Attributes []AttributeSchema
	Blocks     []BlockSchema
}

// AttributeSchema describes one attribute of a configuration body.
type AttributeSchema struct {
	Name        string
	Type        string // "string", "number", "bool", "duration", "list(string)", …
	Required    bool
	Description string
}

// BlockSchema describes one nested block type of a configuration body.
type BlockSchema struct {
	Type        string
	LabelNames  []string
	Body        Schema
	Description string
}

// Capabilities is what a runtime's executors support. Extra carries further
// named capabilities so new ones never break older hosts or plugins.
type Capabilities struct {
	SupportsWorkspaceOnly     bool
	SurvivesSupervisorRestart bool
	NodeLocal                 bool
	Extra                     map[string]bool
}

// CapSharedWorkspace is the Capabilities.Extra key of a runtime whose
// workspace_root every node mounts at the same path: a session whose node is
// gone may then be taken over by another node's plugin.
const CapSharedWorkspace = "shared_workspace"

// Workspace names the directory or git repository a task works in.
type Workspace struct {
	Path   string
	Branch string
}

// LaunchRequest asks a runtime to start one session's executor.
type LaunchRequest struct {
	SessionID      string
	TaskID         string
	ExecutorID     string
	Cluster        string
	Workspace      Workspace
	AgentctlSecret string // never logged
	FencingToken   uint64
	Env            map[string]string
	Options        map[string]string
	// Terminal configures the terminals agentctl serves (the server's
	// `terminal` block); its zero value keeps agentctl's defaults.
	Terminal Terminal
}

// Options keys the host sets itself (users' runtime_options never start
// with "paddock.").
const (
	// OptionExistingWorkspace is "true" when the session ran before: its
	// workspace was made by an earlier launch and must still be there. A
	// runtime fails such a launch with ErrNotFound when the workspace is
	// gone, instead of starting the agent in a new, empty one.
	OptionExistingWorkspace = "paddock.existing_workspace"
)

// IsHostOption reports whether an Options key was set by the host (a
// runtime that refuses unknown options lets these through).
func IsHostOption(key string) bool { return strings.HasPrefix(key, "paddock.") }

// MinReplayBytes is the smallest terminal replay buffer agentctl accepts.
const MinReplayBytes = 4096

// Terminal is how agentctl runs the session's terminals. A zero field means
// agentctl's default: $SHELL of agentctl (else /bin/sh), its default replay
// buffer and idle timeout.
type Terminal struct {
	// Shell is the argv of a terminal's program; nil means agentctl's default.
	Shell []string
	// ReplayBytes is each terminal's replay buffer size (0: default; at
	// least MinReplayBytes otherwise).
	ReplayBytes int
	// IdleTimeout ends a terminal with no connection for that long (0: default).
	IdleTimeout time.Duration
}

// IsZero reports whether t keeps all of agentctl's defaults.
func (t Terminal) IsZero() bool {
	return len(t.Shell) == 0 && t.ReplayBytes == 0 && t.IdleTimeout == 0
}

// Args returns the `agentctl serve` flags for t's set fields, each flag and
// its value a separate argv element (the shell as one -shell JSON array, so
// words beginning with '[' stay words). It assumes t passed Validate.
func (t Terminal) Args() []string {
	var args []string
	if len(t.Shell) > 0 {
		b, err := json.Marshal(t.Shell)
		if err == nil { // a []string always marshals
			args = append(args, "-shell", string(b))
		}
	}
	if t.ReplayBytes > 0 {
		args = append(args, "-replay-bytes", strconv.Itoa(t.ReplayBytes))
	}
	if t.IdleTimeout > 0 {
		args = append(args, "-idle-timeout", t.IdleTimeout.String())
	}
	return args
}

// Validate checks t: a set shell has a non-empty program, no NUL bytes and
// only UTF-8 (it travels as JSON); sizes and durations are not negative,
// and a set replay buffer is at least MinReplayBytes. Failures wrap
// ErrInvalidRequest.
func (t Terminal) Validate() error {
	if t.Shell != nil && (len(t.Shell) == 0 || t.Shell[0] == "") {
		return fmt.Errorf("terminal shell %q: the program (first word) is empty: %w", t.Shell, ErrInvalidRequest)
	}
	for i, w := range t.Shell {
		if containsAny(w, "\x00") || !utf8.ValidString(w) {
			return fmt.Errorf("terminal shell word %d holds a NUL byte or is not UTF-8: %w", i, ErrInvalidRequest)
		}
	}
	if t.ReplayBytes < 0 || (t.ReplayBytes > 0 && t.ReplayBytes < MinReplayBytes) {
		return fmt.Errorf("terminal replay_bytes %d must be 0 (default) or at least %d: %w", t.ReplayBytes, MinReplayBytes, ErrInvalidRequest)
	}
	if t.IdleTimeout < 0 {
		return fmt.Errorf("terminal idle_timeout %s is negative: %w", t.IdleTimeout, ErrInvalidRequest)
	}
	return nil
}

// String describes the request without its secret.
func (r LaunchRequest) String() string {
	return fmt.Sprintf("launch{session=%s task=%s executor=%s workspace=%q}", r.SessionID, r.TaskID, r.ExecutorID, r.Workspace.Path)
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether s is usable as a session, task or executor id: it
// becomes part of paths, branch names and labels.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// Validate checks the fields every runtime relies on. The SDK's gRPC server
// runs it before calling a plugin's Launch; failures wrap ErrInvalidRequest.
func (r LaunchRequest) Validate() error {
	if !ValidID(r.SessionID) {
		return fmt.Errorf("session_id %q must match %s: %w", r.SessionID, idPattern, ErrInvalidRequest)
	}
	for name, v := range map[string]string{"task_id": r.TaskID, "executor_id": r.ExecutorID} {
		if v != "" && !ValidID(v) {
			return fmt.Errorf("%s %q must match %s: %w", name, v, idPattern, ErrInvalidRequest)
		}
	}
	if r.AgentctlSecret == "" {
		return fmt.Errorf("agentctl_secret is empty: %w", ErrInvalidRequest)
	}
	for k := range r.Env {
		if k == "" || containsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is invalid: %w", k, ErrInvalidRequest)
		}
	}
	for k, v := range r.Env {
		if containsAny(v, "\x00") {
			return fmt.Errorf("env %s holds a NUL byte: %w", k, ErrInvalidRequest)
		}
	}
	if err := r.Terminal.Validate(); err != nil {
		return err
	}
	return nil
}

func containsAny(s, chars string) bool {
	for _, c := range s {
		for _, d := range chars {
			if c == d {
				return true
			}
		}
	}
	return false
}

// LaunchResponse describes a running executor.
type LaunchResponse struct {
	// Handle is opaque to the host: it stores it and hands it back.
	Handle []byte
	// AgentctlURL is agentctl's base URL, reachable from every node.
	AgentctlURL string
	// PID is agentctl's process id where the runtime knows it (0 otherwise).
	PID int
	// Nonce is agentctl's boot nonce (new on every start).
	Nonce          string
	ContainerID    string
	WorkspacePath  string
	WorktreePath   string
	WorktreeBranch string
	// AgentctlFingerprint is the SHA-256 (hex) of agentctl's TLS certificate
	// when AgentctlURL is https: every client pins it (agentctl.NewPinnedClient).
	AgentctlFingerprint string
}

// ExecutorState is the coarse state Inspect reports.
type ExecutorState string

// Executor states.
const (
	StateUnknown ExecutorState = "unknown"
	StateRunning ExecutorState = "running"
	StateExited  ExecutorState = "exited"
)

// InspectResponse is what Inspect reports about an executor.
type InspectResponse struct {
	State       ExecutorState
	PID         int
	AgentctlURL string
	Message     string
	Details     map[string]string
}

// Reconciler is an optional capability a runtime plugin may implement beside
// Runtime: garbage collection of executors no executor record owns (an
// executor launched by a supervisor that died before recording it, or one a
// failed destroy left behind). The SDK's gRPC server answers ErrUnsupported
// for a plugin whose implementation lacks it; the host's Runtime always has
// the method (type-assert for Reconciler) and gets ErrUnsupported back.
type Reconciler interface {
	// Reconcile removes every executor this runtime can find labelled with
	// req.Cluster (a runtime may pin its own cluster name in its config,
	// which then wins) whose executor id is not in req.Owned and that was
	// created more than req.Grace ago. Anything it cannot attribute to the
	// cluster with certainty is left alone. It returns runtime-specific ids
	// (for example container ids) of what it removed; on error, those removed
	// before the error.
	Reconcile(ctx context.Context, req ReconcileRequest) (removed []string, err error)
}

// WorkspaceChecker is an optional capability a runtime plugin may implement
// beside Runtime: the host asks it, when a task is created, whether the
// task's workspace path is one the plugin's launches would accept, so that
// a path outside the plugin's confining root is refused then rather than
// at the first session's launch. The path need not exist where the plugin
// runs (it may exist on another node only); a refusal wraps
// ErrInvalidRequest and names the root. As with Reconciler, the SDK's gRPC
// server answers ErrUnsupported for a plugin lacking it.
type WorkspaceChecker interface {
	CheckTaskWorkspace(ctx context.Context, path string) error
}

// ReconcileRequest is what the host owns, for Reconcile.
type ReconcileRequest struct {
	// Cluster is the cluster name the host puts in LaunchRequest.Cluster.
	Cluster string
	// Owned are the executor ids the host's state holds. An executor whose id
	// is here is never removed, whatever its state.
	Owned []string
	// Grace is the minimum age of an executor before it may be removed, so
	// a launch whose record is still being written is left alone and clock
	// skew between host and runtime is absorbed.
	Grace time.Duration
}

// Validate checks a ReconcileRequest; the SDK's gRPC server runs it before
// calling a plugin's Reconcile. Failures wrap ErrInvalidRequest.
func (r ReconcileRequest) Validate() error {
	if r.Cluster != "" && !ValidID(r.Cluster) {
		return fmt.Errorf("cluster %q must match %s: %w", r.Cluster, idPattern, ErrInvalidRequest)
	}
	if r.Grace < 0 {
		return fmt.Errorf("grace %s is negative: %w", r.Grace, ErrInvalidRequest)
	}
	for _, id := range r.Owned {
		if !ValidID(id) {
			return fmt.Errorf("owned executor id %q must match %s: %w", id, idPattern, ErrInvalidRequest)
		}
	}
	return nil
}

// OwnedSet returns Owned as a membership function.
func (r ReconcileRequest) OwnedSet() func(executorID string) bool {
	set := make(map[string]struct{}, len(r.Owned))
	for _, id := range r.Owned {
		set[id] = struct{}{}
	}
	return func(id string) bool { _, ok := set[id]; return ok }
}

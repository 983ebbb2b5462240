package client

import (
	"time"

	"github.com/paddockhq/paddock/api"
)

// Health is this node's GET /v1/health answer.
type Health struct {
	Status string `json:"status"`
	Node   string `json:"node"`
	Leader bool   `json:"leader"`
}

// Peer is one raft server of the cluster.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// Healthy and LastContact are the leader's view (nil when unknown).
	Healthy     *bool      `json:"healthy"`
	LastContact *time.Time `json:"last_contact"`
}

// ClusterStatus is the GET /v1/status answer.
type ClusterStatus struct {
	LeaderID      string `json:"leader_id"`
	LeaderAddress string `json:"leader_address"`
	LeaderHTTP    string `json:"leader_http"`
	Term          uint64 `json:"term"`
	CommitIndex   uint64 `json:"commit_index"`
	AppliedIndex  uint64 `json:"applied_index"`
	Nodes         []Peer `json:"nodes"`
}

// SnapshotRestoreResult is the PUT /v1/operator/snapshot answer.
type SnapshotRestoreResult struct {
	Restored bool   `json:"restored"`
	Index    uint64 `json:"index"`
}

// CreateTaskRequest is the body of POST /v1/tasks.
type CreateTaskRequest struct {
	Title     string        `json:"title"`
	Workspace api.Workspace `json:"workspace"`
}

// CreateSessionRequest is the body of POST /v1/tasks/{id}/sessions.
type CreateSessionRequest struct {
	Agent          string            `json:"agent"`
	Runtime        string            `json:"runtime"`
	RuntimeOptions map[string]string `json:"runtime_options,omitempty"`
}

// Plugin is one loaded runtime plugin (GET /v1/plugins).
type Plugin struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	APIVersion   string          `json:"api_version"`
	Capabilities map[string]bool `json:"capabilities"`
	Healthy      bool            `json:"healthy"`
	Error        string          `json:"error"`
	// PID is the plugin process id (0 when not running).
	PID int `json:"pid"`
	// Restarts counts the server's attempts to start the plugin again
	// after losing it.
	Restarts int `json:"restarts"`
}

// Agent is one configured agent profile (GET /v1/agents).
// SupportsSessionResume is nil when unknown; ResumeSupport says where the
// answer came from: declared, probed or unknown.
type Agent struct {
	Name                  string   `json:"name"`
	Protocol              string   `json:"protocol"`
	Command               []string `json:"command"`
	SupportsSessionResume *bool    `json:"supports_session_resume"`
	ResumeSupport         string   `json:"resume_support"`
}

// FileEntry is one entry of a workspace directory listing
// (GET /v1/sessions/{id}/files?path=).
type FileEntry struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	IsDir bool   `json:"is_dir"`
	// Type is "file", "dir", "symlink" or "other".
	Type    string    `json:"type,omitempty"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode,omitempty"`
	ModTime time.Time `json:"mod_time,omitzero"`
}

// EventFilter selects the events of an Events stream; empty fields match all.
type EventFilter struct {
	SessionID string
	TaskID    string
}

// Terminal is one terminal of a session (GET /v1/sessions/{id}/terminals):
// a person's shell, the pty agent's own terminal, or a command the agent
// runs (Owner "agent"; read-only for people while the agent owns it).
type Terminal struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	Owner   string   `json:"owner"`
	Running bool     `json:"running"`
	// ExitCode is nil while the terminal runs.
	ExitCode *int `json:"exit_code"`
	ReadOnly bool `json:"read_only"`
}

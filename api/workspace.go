package api

import "time"

// FileEntry is one entry of a workspace directory listing
// (GET /v1/sessions/{id}/files?path=, answered by the session's agentctl).
type FileEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// Terminal is one terminal of a session (GET /v1/sessions/{id}/terminals,
// answered by the session's agentctl): a person's shell, the pty agent's own
// terminal, or a command the agent runs (Owner "agent", else "user";
// read-only for people while the agent owns it).
type Terminal struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	Owner   string   `json:"owner"`
	Running bool     `json:"running"`
	// ExitCode is nil while the terminal runs.
	ExitCode *int `json:"exit_code"`
	// ReadOnly: people may watch it but not type into it (a command the
	// agent runs).
	ReadOnly bool `json:"read_only"`
}

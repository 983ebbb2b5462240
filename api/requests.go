package api

// CreateTaskRequest is the body of POST /v1/tasks.
type CreateTaskRequest struct {
	Title     string    `json:"title"`
	Workspace Workspace `json:"workspace"`
}

// CreateSessionRequest is the body of POST /v1/tasks/{id}/sessions.
type CreateSessionRequest struct {
	Agent          string            `json:"agent"`
	Runtime        string            `json:"runtime"`
	RuntimeOptions map[string]string `json:"runtime_options,omitempty"`
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

package dockerexec

import (
	"encoding/json"
	"fmt"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

// handle is what the host stores for an executor. It never holds the secret.
type handle struct {
	V           int    `json:"v"`
	ContainerID string `json:"container_id"`
	SessionID   string `json:"session_id"`
	ExecutorID  string `json:"executor_id,omitempty"`
	Cluster     string `json:"cluster,omitempty"`
	URL         string `json:"url"`
	Nonce       string `json:"nonce"`
	PID         int    `json:"pid"`
	// Fingerprint is agentctl's certificate fingerprint when it serves TLS.
	Fingerprint string `json:"fingerprint,omitempty"`
	workspace.Layout
}

const handleVersion = 1

// decodeHandle decodes and checks a handle; anything unusable is ErrNotFound.
func decodeHandle(b []byte, root string) (handle, error) {
	var h handle
	if len(b) == 0 {
		return h, fmt.Errorf("handle is empty: %w", runtime.ErrInvalidRequest)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("decode handle: %v: %w", err, runtime.ErrNotFound)
	}
	if h.V != handleVersion || !runtime.ValidID(h.SessionID) || !validContainerID(h.ContainerID) {
		return h, fmt.Errorf("handle is not a docker executor handle: %w", runtime.ErrNotFound)
	}
	return h, h.Layout.Check(root, h.SessionID)
}

func validContainerID(id string) bool {
	if len(id) < 12 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (h handle) response() runtime.LaunchResponse {
	b, _ := json.Marshal(h)
	resp := runtime.LaunchResponse{Handle: b, AgentctlURL: h.URL, PID: h.PID, Nonce: h.Nonce, ContainerID: h.ContainerID, AgentctlFingerprint: h.Fingerprint}
	h.Layout.Response(&resp)
	return resp
}

package client

import (
	"context"
	"net/http"
	"time"
)

// NodeHealth is the leader's view of one node as an executor host.
type NodeHealth struct {
	Node        string          `json:"node"`
	Available   bool            `json:"available"`
	LastContact time.Time       `json:"last_contact"`
	Plugins     map[string]bool `json:"plugins"`
	// MaxSessions is the node's limits.max_sessions_per_node as it last
	// reported it (0: no cap).
	MaxSessions int    `json:"max_sessions,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Nodes lists every node with whether it answers, its last contact and its
// plugins' health (GET /v1/nodes).
func (c *Client) Nodes(ctx context.Context, opts ...CallOption) ([]NodeHealth, error) {
	var out struct {
		Nodes []NodeHealth `json:"nodes"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Nodes, nil
}

package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/paddockhq/paddock/api"
)

// ClaimController registers (or renews) id as the session's conversation
// controller, as `paddock chat` does while it runs: the registration lapses
// unless renewed within 15 s. Another client's registration is replaced
// only with takeover; otherwise the answer is an *APIError with code
// "conflict" whose message names the holder.
func (c *Client) ClaimController(ctx context.Context, sessionID string, id api.ClientID, takeover bool, opts ...CallOption) (*api.Controller, error) {
	if err := requireID("session", sessionID); err != nil {
		return nil, err
	}
	if err := id.CheckComplete(); err != nil {
		return nil, fmt.Errorf("claim controller: %w", err)
	}
	var out api.Controller
	req := api.ControllerRequest{Client: id, Takeover: takeover}
	if err := c.do(ctx, http.MethodPut, "/v1/sessions/"+seg(sessionID)+"/controller", nil, req, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseController ends the conversation registration of the client with
// that nonce (no error when none is held; "conflict" when another client
// holds it).
func (c *Client) ReleaseController(ctx context.Context, sessionID, nonce string, opts ...CallOption) error {
	if err := requireID("session", sessionID); err != nil {
		return err
	}
	if nonce == "" {
		return fmt.Errorf("release controller: nonce is empty")
	}
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+seg(sessionID)+"/controller", url.Values{"nonce": {nonce}}, nil, nil, opts)
}

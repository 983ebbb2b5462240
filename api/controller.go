package api

import "github.com/paddockhq/paddock/api/termproto"

// ClientID identifies a controlling program: its host, its pid there and a
// nonce it made at start, so a reused pid is a different client. It is the
// terminal hello's identity; a chat registers with it too
// (ClientID.CheckComplete says what a registration needs).
type ClientID = termproto.ClientID

// ControllerRequest is the body of PUT /v1/sessions/{id}/controller: a
// chat registers (or renews) itself as the session's conversation
// controller.
type ControllerRequest struct {
	Client ClientID `json:"client"`
	// Takeover replaces another client's registration; without it a
	// session another client holds is refused (409).
	Takeover bool `json:"takeover,omitempty"`
}

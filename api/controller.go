package api

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// ClientID identifies a controlling program: its host, its pid there and a
// nonce it made at start, so a reused pid is a different client. It has
// the fields of the terminal hello's identity (termproto.ClientID).
type ClientID struct {
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Nonce string `json:"nonce"`
}

// ControllerRequest is the body of PUT /v1/sessions/{id}/controller: a
// chat registers (or renews) itself as the session's conversation
// controller.
type ControllerRequest struct {
	Client ClientID `json:"client"`
	// Takeover replaces another client's registration; without it a
	// session another client holds is refused (409).
	Takeover bool `json:"takeover,omitempty"`
}

// Bounds of a ClientID's fields (as the terminal hello's).
const (
	MaxClientHost  = 255
	MaxClientNonce = 128
)

// Check reports what is wrong with a registering client's identity: a
// registration is released and renewed by its nonce and shown by its host,
// so both must be given, bounded and printable, and the pid positive.
func (c ClientID) Check() error {
	switch {
	case c.Host == "" || len(c.Host) > MaxClientHost || !printable(c.Host):
		return fmt.Errorf("client host %q: must be 1 to %d printable bytes", c.Host, MaxClientHost)
	case c.PID <= 0:
		return fmt.Errorf("client pid %d: must be positive", c.PID)
	case c.Nonce == "":
		return errors.New("client nonce is empty")
	case len(c.Nonce) > MaxClientNonce || !printable(c.Nonce):
		return fmt.Errorf("client nonce: must be at most %d printable bytes", MaxClientNonce)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

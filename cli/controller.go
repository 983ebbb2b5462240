package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
)

// envControllerNonce carries this process's controller nonce across the
// picker's exec: the `paddock attach` it becomes keeps the pid, and with the
// nonce it keeps the whole identity.
const envControllerNonce = "PADDOCK_CONTROLLER_NONCE"

// self is this process as a terminal controller, made once.
var self = sync.OnceValue(func() termproto.ClientID {
	host, _ := os.Hostname()
	id := termproto.ClientID{Host: host, PID: os.Getpid(), Nonce: os.Getenv(envControllerNonce)}
	if !validNonce(id.Nonce) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		id.Nonce = hex.EncodeToString(b)
	}
	return id
})

// validNonce reports whether an inherited nonce is one this CLI made.
func validNonce(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ownerOf says what a session's agent terminal controller is to this
// process: nobody (nil), this very process, a dead one (a pid of this host
// that is gone, or this pid under another nonce: it was reused), or another
// live owner. A controller on another host counts as live.
func ownerOf(c *api.Controller) owner {
	me := self()
	switch {
	case c == nil:
		return ownerNone
	case c.Host != me.Host || c.PID <= 0:
		return ownerOther
	case c.PID == me.PID && c.Nonce == me.Nonce:
		return ownerSelf
	case c.PID == me.PID || !processAlive(c.PID):
		return ownerDead
	}
	return ownerOther
}

// owner is the answer of ownerOf.
type owner int

// Owners.
const (
	ownerNone owner = iota
	ownerSelf
	ownerDead
	ownerOther
)

// processAlive reports whether a pid of this host runs (a process of
// another user counts as running).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

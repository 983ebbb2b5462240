package runtime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/runtime"
)

// FuzzUnmarshalReattach: malformed reattach files never panic and anything
// accepted has a positive pid and an address.
func FuzzUnmarshalReattach(f *testing.F) {
	f.Add([]byte(`{"protocol":"grpc","protocol_version":1,"network":"unix","address":"/tmp/p.sock","pid":12}`))
	f.Add([]byte(`{"pid":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := runtime.UnmarshalReattach(data)
		if err != nil {
			return
		}
		if rc.Pid <= 0 || rc.Addr == nil {
			t.Fatalf("accepted %q as %+v", data, rc)
		}
	})
}

// FuzzTerminalArgs: any shell argv Validate accepts becomes one -shell JSON
// array that decodes back to the same words, and never a bare flag.
func FuzzTerminalArgs(f *testing.F) {
	f.Add("/bin/sh", "-l", 4096, int64(1))
	f.Add("", "x", -1, int64(-1))
	f.Add("[", "\x00", 100, int64(0))
	f.Fuzz(func(t *testing.T, prog, arg string, replay int, idle int64) {
		term := runtime.Terminal{Shell: []string{prog, arg}, ReplayBytes: replay, IdleTimeout: time.Duration(idle)}
		if term.Validate() != nil {
			return
		}
		args := term.Args()
		if len(args) < 2 || args[0] != "-shell" {
			t.Fatalf("args %q: want -shell first", args)
		}
		var back []string
		if err := json.Unmarshal([]byte(args[1]), &back); err != nil || len(back) != 2 || back[0] != prog || back[1] != arg {
			t.Fatalf("-shell %q decodes to %q (%v), want %q", args[1], back, err, term.Shell)
		}
		if len(args)%2 != 0 {
			t.Fatalf("args %q are not flag/value pairs", args)
		}
	})
}

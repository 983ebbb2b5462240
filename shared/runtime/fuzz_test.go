package runtime_test

import (
	"testing"

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

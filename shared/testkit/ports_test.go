package testkit

import (
	"net"
	"strconv"
	"testing"
)

// The ports FreePorts returns are distinct: asked for one at a time, the
// kernel may hand out a just-closed port again.
func TestFreePortsAreDistinct(t *testing.T) {
	for range 20 {
		ports, err := FreePorts("127.0.0.1", 8)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p <= 0 || seen[p] {
				t.Fatalf("ports %v: %d is not a new free port", ports, p)
			}
			seen[p] = true
		}
	}
}

// The ports are below the kernel's ephemeral range, where no outgoing
// connection or port-0 listener of the machine's takes one before the
// caller binds it, and each is free once FreePorts returns.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	lo, hi := belowEphemeral()
	if hi == 0 {
		t.Skip("no room below this kernel's ephemeral ports (net.ipv4.ip_local_port_range)")
	}
	ports, err := FreePorts("127.0.0.1", 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < lo || p >= hi {
			t.Fatalf("port %d is outside [%d, %d)", p, lo, hi)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free after FreePorts: %v", p, err)
		}
		ln.Close()
	}
}

// Package testkit is what Paddock's tests share: a wait for a condition that
// says why it does not hold yet, and free ports to bind test servers to. Every
// package's tests use these rather than copies of their own. It imports only
// the standard library, so tests anywhere in the module (shared/ included)
// may use it; product code never does.
package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pollInterval is how often WaitFor checks: a polling interval, not a
// synchronisation.
const pollInterval = 20 * time.Millisecond

// WaitFor checks check until it reports done, and fails t once timeout has
// passed, naming what it waited for and the last reason check gave (its
// error), as Nomad's testutil.WaitForResult does: a timeout then says why,
// not only that. check runs on t's goroutine.
func WaitFor(t testing.TB, timeout time.Duration, what string, check func() (done bool, err error)) {
	t.Helper()
	if err := Wait(timeout, check); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

// Wait is WaitFor for callers without a testing.TB (a benchmark harness, a
// helper goroutine): it returns nil once check reports done, or an error
// holding check's last reason once timeout has passed.
func Wait(timeout time.Duration, check func() (done bool, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("the condition still did not hold")
			}
			return err
		}
		time.Sleep(pollInterval)
	}
}

// Cond adapts a condition that has no reason to give to WaitFor.
func Cond(cond func() bool) func() (bool, error) {
	return func() (bool, error) { return cond(), nil }
}

// MustFreePorts is FreePorts that fails t when there are none.
func MustFreePorts(t testing.TB, ip string, n int) []int {
	t.Helper()
	ports, err := FreePorts(ip, n)
	if err != nil {
		t.Fatalf("free ports on %s: %v", ip, err)
	}
	return ports
}

// FreePorts returns n distinct ports that were free on ip a moment ago.
// They are picked below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where outgoing connections and listeners
// on port 0 take theirs, so the machine's other work (a parallel test's
// agentctls and clients) does not take one between the pick and the
// server's bind; where there is no room below it, they are the kernel's.
// Each is held open until all are picked: ports asked for one at a time
// may be the same one twice (a node then got one port for both its HTTP
// API and raft, and refused its config).
func FreePorts(ip string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	hold := func(port int) error {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		held = append(held, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		return nil
	}
	lo, hi := belowEphemeral()
	if span := hi - lo; span >= 16*n {
		start := rand.IntN(span)
		for i := 0; i < span && len(ports) < n; i++ {
			_ = hold(lo + (start+i)%span) // a port in use is skipped
		}
		if len(ports) == n {
			return ports, nil
		}
	}
	for len(ports) < n {
		if err := hold(0); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// belowEphemeral is the range of ports [lo, hi) FreePorts picks from: from
// 20000 up to the kernel's first ephemeral port; empty when the range
// cannot be read.
func belowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first <= 20000 {
		return 0, 0
	}
	return 20000, first
}

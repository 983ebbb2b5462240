// Package netns builds a small network of hosts on one Linux machine for
// partition tests: one network namespace per host, each joined by a veth
// pair to a bridge that lives in its own "switch" namespace (a bridge in the
// host namespace would be blocked by Docker's FORWARD DROP), addresses
// 10.99.S.1…n, and a veth from the calling process's namespace into the
// bridge (10.99.S.254) so tests can reach every host. Cut and Heal take a
// host's switch port down and up. Everything is removed by Close, and every
// `ip` call is bounded in time.
//
// It needs root and iproute2's `ip`. It must not import Paddock packages.
package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cmdTimeout bounds one `ip` invocation.
const cmdTimeout = 10 * time.Second

// Host is one network namespace on the switch.
type Host struct {
	// Namespace is the netns name (for `ip netns exec`).
	Namespace string
	// IP is the host's address on the switch.
	IP string
	// port is the switch-side veth name (in the switch namespace).
	port string
}

// Net is a switch namespace with hosts attached.
type Net struct {
	// Switch is the switch namespace's name.
	Switch string
	// Hosts are the attached namespaces, in order.
	Hosts []*Host
	// HostIP is the calling namespace's address on the switch.
	HostIP string

	ip       string
	hostLink string
	mu       sync.Mutex
	closed   bool
}

// IPPath returns the path of iproute2's ip, or an error saying why network
// namespaces cannot be used here (no ip, not root, or netns creation fails).
func IPPath() (string, error) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return "", fmt.Errorf("iproute2's ip is not installed: %w", err)
	}
	if os.Geteuid() != 0 {
		return "", errors.New("network namespaces need root")
	}
	probe := fmt.Sprintf("pdkprobe%d", os.Getpid()%100000)
	if err := run(ip, "netns", "add", probe); err != nil {
		return "", fmt.Errorf("cannot create a network namespace: %w", err)
	}
	_ = run(ip, "netns", "del", probe)
	return ip, nil
}

// New creates a switch and n hosts (n ≤ 200). Names start with prefix
// (at most 8 characters; make it unique per process, e.g. with the pid).
// The subnet 10.99.S.0/24 uses the first S in 0…250 not already on an
// interface of the calling namespace. On error everything made is removed.
func New(prefix string, n int) (*Net, error) {
	if prefix == "" || len(prefix) > 8 || strings.ContainsAny(prefix, "/ \t") {
		return nil, fmt.Errorf("netns: prefix %q must be 1–8 characters without spaces or slashes", prefix)
	}
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("netns: %d hosts; want 1–200", n)
	}
	ip, err := IPPath()
	if err != nil {
		return nil, err
	}
	subnet, err := freeSubnet(ip)
	if err != nil {
		return nil, err
	}
	nw := &Net{Switch: prefix + "sw", ip: ip, hostLink: prefix + "h", HostIP: fmt.Sprintf("10.99.%d.254", subnet)}
	steps := [][]string{
		{"netns", "add", nw.Switch},
		{"-n", nw.Switch, "link", "set", "lo", "up"},
		{"-n", nw.Switch, "link", "add", "br0", "type", "bridge"},
		{"-n", nw.Switch, "link", "set", "br0", "up"},
		// The caller's port: created here, its peer moved into the switch.
		{"link", "add", nw.hostLink, "type", "veth", "peer", "name", "uplink", "netns", nw.Switch},
		{"-n", nw.Switch, "link", "set", "uplink", "master", "br0"},
		{"-n", nw.Switch, "link", "set", "uplink", "up"},
		{"addr", "add", nw.HostIP + "/24", "dev", nw.hostLink},
		{"link", "set", nw.hostLink, "up"},
	}
	for i := 1; i <= n; i++ {
		h := &Host{Namespace: fmt.Sprintf("%s%d", prefix, i), IP: fmt.Sprintf("10.99.%d.%d", subnet, i), port: fmt.Sprintf("veth%d", i)}
		nw.Hosts = append(nw.Hosts, h)
		steps = append(steps,
			[]string{"netns", "add", h.Namespace},
			[]string{"-n", h.Namespace, "link", "set", "lo", "up"},
			[]string{"-n", nw.Switch, "link", "add", h.port, "type", "veth", "peer", "name", "eth0", "netns", h.Namespace},
			[]string{"-n", nw.Switch, "link", "set", h.port, "master", "br0"},
			[]string{"-n", nw.Switch, "link", "set", h.port, "up"},
			[]string{"-n", h.Namespace, "addr", "add", h.IP + "/24", "dev", "eth0"},
			[]string{"-n", h.Namespace, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := run(ip, s...); err != nil {
			nw.Close()
			return nil, fmt.Errorf("netns: build network: %w", err)
		}
	}
	return nw, nil
}

// freeSubnet picks S for 10.99.S.0/24 not yet used in this namespace.
func freeSubnet(ip string) (int, error) {
	out, err := output(ip, "-o", "-4", "addr", "show")
	if err != nil {
		return 0, err
	}
	for s := 0; s <= 250; s++ {
		if !strings.Contains(out, fmt.Sprintf(" 10.99.%d.", s)) {
			return s, nil
		}
	}
	return 0, errors.New("netns: no free 10.99.S.0/24 subnet")
}

// Cut takes host i's switch port down: it can reach nobody and nobody it.
func (nw *Net) Cut(i int) error {
	return nw.setPort(i, "down")
}

// Heal brings host i's switch port back up.
func (nw *Net) Heal(i int) error {
	return nw.setPort(i, "up")
}

func (nw *Net) setPort(i int, updown string) error {
	if i < 0 || i >= len(nw.Hosts) {
		return fmt.Errorf("netns: no host %d", i)
	}
	return run(nw.ip, "-n", nw.Switch, "link", "set", nw.Hosts[i].port, updown)
}

// Command returns cmd to run name with args inside host i's namespace;
// `ip netns exec` execs the program, so the process keeps the pid.
func (nw *Net) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command(nw.ip, append([]string{"netns", "exec", nw.Hosts[i].Namespace, name}, args...)...)
}

// Wrapper returns argv that runs a program inside host i's namespace.
func (nw *Net) Wrapper(i int) []string {
	return []string{nw.ip, "netns", "exec", nw.Hosts[i].Namespace}
}

// KillAll SIGKILLs every process in host i's namespace (a machine's power
// cut) and waits, up to timeout, until none is left but zombies. Processes
// in namespaces of their own (containers) are not in it.
func (nw *Net) KillAll(i int, timeout time.Duration) error {
	if i < 0 || i >= len(nw.Hosts) {
		return fmt.Errorf("netns: no host %d", i)
	}
	deadline := time.Now().Add(timeout)
	for {
		out, err := output(nw.ip, "netns", "pids", nw.Hosts[i].Namespace)
		if err != nil {
			return nil // the namespace is gone
		}
		alive := 0
		for _, f := range strings.Fields(out) {
			pid, err := strconv.Atoi(f)
			if err != nil || zombie(pid) {
				continue
			}
			alive++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %d processes of %s survive SIGKILL", alive, nw.Hosts[i].Namespace)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits to be reaped (or is gone).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// Close deletes the hosts, the switch and the caller's port (idempotent).
// Processes still running inside a namespace keep it alive until they exit,
// but its name and interfaces are removed.
func (nw *Net) Close() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		return nil
	}
	nw.closed = true
	var errs []error
	if linkExists(nw.ip, nw.hostLink) {
		errs = append(errs, run(nw.ip, "link", "del", nw.hostLink))
	}
	for _, h := range nw.Hosts {
		if nsExists(nw.ip, h.Namespace) {
			errs = append(errs, run(nw.ip, "netns", "del", h.Namespace))
		}
	}
	if nsExists(nw.ip, nw.Switch) {
		errs = append(errs, run(nw.ip, "netns", "del", nw.Switch))
	}
	return errors.Join(errs...)
}

func nsExists(ip, name string) bool {
	out, err := output(ip, "netns", "list")
	if err != nil {
		return true
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func linkExists(ip, name string) bool {
	return run(ip, "link", "show", name) == nil
}

// CleanStale removes namespaces whose names start with prefix (left over by
// a process that was killed before Close), and the caller-side port.
func CleanStale(prefix string) error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return err
	}
	out, err := output(ip, "netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			errs = append(errs, run(ip, "netns", "del", f[0]))
		}
	}
	if linkExists(ip, prefix+"h") {
		errs = append(errs, run(ip, "link", "del", prefix+"h"))
	}
	return errors.Join(errs...)
}

func run(ip string, args ...string) error {
	_, err := output(ip, args...)
	return err
}

func output(ip string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, ip, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

package netns

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCutAndHeal builds three hosts, checks they reach each other and the
// caller, cuts one off, heals it, and removes everything.
func TestCutAndHeal(t *testing.T) {
	if _, err := IPPath(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("network namespaces are required under CI: %v", err)
		}
		t.Skipf("network namespaces unavailable: %v", err)
	}
	prefix := fmt.Sprintf("pt%d", os.Getpid()%100000)
	nw, err := New(prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	// The caller listens on its switch address; hosts dial it with bash's
	// /dev/tcp (no extra tools), through the bridge.
	ln, err := net.Listen("tcp", nw.HostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	reach := func(from int) bool {
		cmd := nw.Command(from, "bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(ln.Addr().String(), ":", "/", 1))
		return runBounded(cmd, 3*time.Second) == nil
	}
	for i := range nw.Hosts {
		if !reach(i) {
			t.Fatalf("host %d cannot reach the caller before the cut", i)
		}
	}
	if err := nw.Cut(0); err != nil {
		t.Fatal(err)
	}
	if reach(0) {
		t.Fatal("a cut host still reaches the switch")
	}
	if !reach(1) {
		t.Fatal("the majority side lost its link")
	}
	if err := nw.Heal(0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !reach(0) {
		if time.Now().After(deadline) {
			t.Fatal("healed host unreachable")
		}
	}
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := output(nw.ip, "netns", "list")
	if strings.Contains(out, prefix) {
		t.Fatalf("namespaces left after Close:\n%s", out)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		n      int
	}{{"", 3}, {"waytoolongprefix", 3}, {"a b", 3}, {"ok", 0}, {"ok", 201}} {
		if _, err := New(tc.prefix, tc.n); err == nil {
			t.Errorf("New(%q, %d) succeeded", tc.prefix, tc.n)
		}
	}
}

func runBounded(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("timed out after %s", d)
	}
}

// TestKillAll kills every process of one host's namespace, children
// included, and leaves the other hosts' processes alone.
func TestKillAll(t *testing.T) {
	if _, err := IPPath(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("network namespaces are required under CI: %v", err)
		}
		t.Skipf("network namespaces unavailable: %v", err)
	}
	nw, err := New(fmt.Sprintf("pk%d", os.Getpid()%100000), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	var cmds []*exec.Cmd
	for i := range nw.Hosts {
		// A shell with a child of its own: both must go.
		c := nw.Command(i, "sh", "-c", "sleep 60 & wait")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	defer func() {
		_ = cmds[1].Process.Kill()
		_ = cmds[1].Wait()
	}()
	count := func(i int) int {
		out, _ := exec.Command("ip", "netns", "pids", nw.Hosts[i].Namespace).Output()
		return len(strings.Fields(string(out)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for (count(0) < 2 || count(1) < 2) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if count(0) < 2 || count(1) < 2 {
		t.Fatalf("processes in the namespaces: %d and %d, want 2 each", count(0), count(1))
	}
	if err := nw.KillAll(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = cmds[0].Wait()
	if n := count(0); n != 0 {
		t.Errorf("%d processes left in host 0 after KillAll", n)
	}
	if n := count(1); n < 2 {
		t.Errorf("host 1 lost its processes (%d left)", n)
	}
	if err := nw.KillAll(5, time.Second); err == nil {
		t.Error("KillAll of a host that does not exist succeeded")
	}
}

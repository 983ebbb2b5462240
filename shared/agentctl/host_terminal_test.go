package agentctl_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/shared/agentctl"
)

func TestInstanceTerminalArgsAndValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   agentctl.InstanceTerminal
		want []string
	}{
		{"zero", agentctl.InstanceTerminal{}, nil},
		{"shell", agentctl.InstanceTerminal{Shell: []string{"/bin/sh", "-l"}}, []string{"-shell", `["/bin/sh","-l"]`}},
		{"all", agentctl.InstanceTerminal{Shell: []string{"[zsh"}, ReplayBytes: 8192, IdleTimeoutMS: 1500},
			[]string{"-shell", `["[zsh"]`, "-replay-bytes", "8192", "-idle-timeout", "1.5s"}},
	} {
		if err := tc.in.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
		if got := tc.in.Args(); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("%s: Args() = %q, want %q", tc.name, got, tc.want)
		}
	}
	for name, bad := range map[string]agentctl.InstanceTerminal{
		"empty_shell":     {Shell: []string{}},
		"empty_program":   {Shell: []string{"", "-l"}},
		"nul_word":        {Shell: []string{"sh", "a\x00"}},
		"not_utf8":        {Shell: []string{"sh", "\xb0"}},
		"negative_replay": {ReplayBytes: -1},
		"tiny_replay":     {ReplayBytes: agentctl.MinReplayBytes - 1},
		"negative_idle":   {IdleTimeoutMS: -1},
		"huge_idle":       {IdleTimeoutMS: 1 << 62},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The host passes a create request's terminal settings to the instance's
// `agentctl serve` as flags, and refuses malformed ones with 400.
func TestHostInstanceTerminalFlags(t *testing.T) {
	root := t.TempDir()
	_, hc := startHost(t, root)
	term := &agentctl.InstanceTerminal{Shell: []string{"/bin/sh", "-c", "echo hi; exec /bin/sh"}, ReplayBytes: 65536, IdleTimeoutMS: 90_000}
	inst, err := hc.CreateInstanceFrom(ctx(t), agentctl.CreateInstanceRequest{SessionID: "sess-t", Secret: "0123456789abcdef0123", Terminal: term})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(inst.PID, syscall.SIGKILL) })
	if !inst.Healthy {
		t.Fatalf("instance with terminal flags is not healthy: %+v", inst)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", inst.PID))
	if err != nil {
		t.Fatal(err)
	}
	want := "\x00-shell\x00" + `["/bin/sh","-c","echo hi; exec /bin/sh"]` + "\x00-replay-bytes\x0065536\x00-idle-timeout\x001m30s\x00"
	if !strings.Contains(string(b), want) {
		t.Fatalf("instance argv %q lacks %q", b, want)
	}
	for name, bad := range map[string]*agentctl.InstanceTerminal{
		"empty_program":   {Shell: []string{""}},
		"negative_replay": {ReplayBytes: -5},
		"tiny_replay":     {ReplayBytes: 100},
	} {
		_, err := hc.CreateInstanceFrom(ctx(t), agentctl.CreateInstanceRequest{SessionID: "sess-bad", Terminal: bad})
		if err == nil {
			t.Fatalf("%s: create accepted", name)
		}
		if ae := apiErr(t, err); ae.Status != 400 {
			t.Errorf("%s: status %d, want 400", name, ae.Status)
		}
	}
}

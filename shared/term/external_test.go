package term

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/agentctl/ptyagent"
	"github.com/paddockhq/paddock/shared/testkit"
)

// agentPTY adapts a real ptyagent.Agent (agentctl's pty agent) to External.
type agentPTY struct{ *ptyagent.Agent }

func (a agentPTY) Resize(cols, rows int) error { return a.Agent.Resize(uint16(cols), uint16(rows)) }

// agentSlot plays agentctl's role: it owns the current agent and can replace it.
type agentSlot struct {
	mu sync.Mutex
	a  *ptyagent.Agent
}

func (s *agentSlot) start(t *testing.T) *ptyagent.Agent {
	t.Helper()
	a, err := ptyagent.Start(ptyagent.Config{Argv: []string{"/bin/sh"}, Dir: t.TempDir(), Env: append(os.Environ(), "PS1=$ ")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(time.Second) })
	s.mu.Lock()
	s.a = a
	s.mu.Unlock()
	return a
}

func (s *agentSlot) get() (External, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.a == nil {
		return nil, errors.New("no pty agent is running")
	}
	return agentPTY{s.a}, nil
}

func TestExternalAgentTerminal(t *testing.T) {
	slot := &agentSlot{}
	a := slot.start(t)
	_, _ = a.Write([]byte("echo BEFORE-ATTACH\r"))
	testkit.WaitFor(t, 5*time.Second, "agent output", testkit.Cond(func() bool {
		h, _ := a.History()
		return strings.Count(string(h), "BEFORE-ATTACH") >= 2
	}))
	m, srv := newTestServer(t, Options{External: map[string]func() (External, error){"agent": slot.get}})

	c, at := attach(t, srv, "agent", termproto.Hello{Cols: 91, Rows: 31})
	if at.Pid != a.PID() || at.Replay != termproto.ReplayFull {
		t.Fatalf("attached %+v, agent pid %d", at, a.PID())
	}
	c.waitOutput("BEFORE-ATTACH") // the history from before the terminal existed
	c.input("stty size; echo \"PID:$$\"\r")
	c.waitOutput("31 91")
	c.waitOutput("PID:" + strconv.Itoa(a.PID()))

	c.sendJSON(termproto.Reset{})
	if e := c.waitMsg("error").(termproto.Error); !strings.Contains(e.Message, "cannot be reset") {
		t.Fatalf("reset of a running agent: %+v", e)
	}

	// Reconnect with the position: a delta, same program.
	pos := c.position()
	_ = c.ws.Close()
	c.waitClosed()
	_, _ = a.Write([]byte("echo WHILE-AWAY\r"))
	at1, _ := m.Terminal("agent")
	testkit.WaitFor(t, 5*time.Second, "output while away", testkit.Cond(func() bool { return strings.Count(ringText(at1.Ring()), "WHILE-AWAY") >= 2 }))
	c2, at2 := attach(t, srv, "agent", termproto.Hello{Epoch: at.Epoch, Offset: &pos})
	if at2.Replay != termproto.ReplayDelta || at2.Epoch != at.Epoch {
		t.Fatalf("reattach %+v", at2)
	}
	c2.waitOutput("WHILE-AWAY")
	if strings.Contains(c2.output(), "BEFORE-ATTACH") {
		t.Fatal("delta replay repeated old output")
	}

	// The program exits: the client hears it; the terminal does not own a new one yet.
	c2.input("exit 4\r")
	if ex := c2.waitMsg("exited").(termproto.Exited); ex.Code != 4 {
		t.Fatalf("exit code %d", ex.Code)
	}
	_ = c2.ws.Close()
	c2.waitClosed()
	c3, at3 := attach(t, srv, "agent", termproto.Hello{})
	if at3.Pid != a.PID() || !strings.Contains(at3.Notice, "exited with code 4") {
		t.Fatalf("attach to exited agent: %+v", at3)
	}
	c3.waitMsg("exited")
	_ = c3.ws.Close()
	c3.waitClosed()

	// The owner starts a new program: the next attach shows it under a new epoch.
	b := slot.start(t)
	c4, at4 := attach(t, srv, "agent", termproto.Hello{Epoch: at.Epoch, Offset: &pos})
	if at4.Pid != b.PID() || at4.Epoch == at.Epoch || at4.Notice == "" {
		t.Fatalf("attach to the new agent: %+v (new pid %d)", at4, b.PID())
	}
	c4.input("echo NEW-AGENT\r")
	c4.waitOutput("NEW-AGENT")

	// Closing the terminals never kills a program they do not own.
	_ = c4.ws.Close()
	c4.waitClosed()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !alive(b.PID()) {
		t.Fatal("closing the manager killed the agent")
	}
	select {
	case <-b.Done():
		t.Fatal("agent ended")
	default:
	}
}

func TestExternalAgentMissing(t *testing.T) {
	slot := &agentSlot{}
	_, srv := newTestServer(t, Options{External: map[string]func() (External, error){"agent": slot.get}})
	c := dial(t, srv, "agent", termproto.Hello{})
	if e := c.waitMsg("error").(termproto.Error); !strings.Contains(e.Message, "no pty agent") {
		t.Fatalf("error %+v", e)
	}
	c.waitClosed()
	// Other names still get shells.
	sh, _ := attach(t, srv, "shell", termproto.Hello{})
	sh.marker()
}

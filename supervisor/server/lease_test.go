package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// TestLeaseShowsTheLiveExpiry: renewals are not raft writes, so the
// replicated expires_at is the claim's. The API showed that, so a healthy
// lease read as held with an expiry in the past; it now shows the leader's.
func TestLeaseShowsTheLiveExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const ttl = time.Second
	c := newTestClusterWith(t, 1, testToken, func(_ int, cfg *config.Config) { cfg.Lease.TTL = ttl })
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "lease"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), sess.ID) })
	var first *api.Lease
	testkit.WaitFor(t, 20*time.Second, "a held lease", testkit.Cond(func() bool {
		first, err = cl.Lease(ctx(t), sess.ID)
		return err == nil && first.State == api.LeaseHeld
	}))
	// Wait until the claim's own expiry has passed: the lease has been
	// renewed at least twice by then.
	testkit.WaitFor(t, 10*time.Second, "the claim's expiry to pass", testkit.Cond(func() bool { return time.Now().After(first.ExpiresAt.Add(ttl / 2)) }))
	now := time.Now()
	l, err := cl.Lease(ctx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.State != api.LeaseHeld || !l.ExpiresAt.After(now) || l.ExpiresAt.After(now.Add(2*ttl)) {
		t.Fatalf("lease %+v at %s: want held, expiring within the next ttl (%s)", l, now.Format(time.RFC3339Nano), ttl)
	}
}

// TestAgentsReportProbedResume: GET /v1/agents said "unknown" for an ACP
// agent that declares nothing even after agentctl had probed it.
func TestAgentsReportProbedResume(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, testToken, func(_ int, cfg *config.Config) {
		cfg.Agents = append(cfg.Agents, &config.Agent{Name: "demo-noresume", Protocol: config.ProtocolACP,
			Command: []string{"paddock-demo-agent", "--no-resume"}, Permission: config.PermissionDeny})
	})
	cl := c.client(0)
	support := func() map[string]string {
		agents, err := cl.Agents(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, a := range agents {
			v := "nil"
			if a.SupportsSessionResume != nil {
				v = fmt.Sprint(*a.SupportsSessionResume)
			}
			out[a.Name] = a.ResumeSupport + "/" + v
		}
		return out
	}
	if got := support(); got["demo"] != "unknown/nil" || got["demo-noresume"] != "unknown/nil" {
		t.Fatalf("before any session: %v", got)
	}
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{"demo", "demo-noresume"} {
		s, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), s.ID) })
		testkit.WaitFor(t, 20*time.Second, agent+" waiting for input", testkit.Cond(func() bool {
			got, err := cl.GetSession(ctx(t), s.ID)
			return err == nil && got.State == api.SessionWaitingForInput
		}))
	}
	if got := support(); got["demo"] != "probed/true" || got["demo-noresume"] != "probed/false" {
		t.Fatalf("after agentctl probed both: %v", got)
	}
}

// TestAFailedProbeSaysNothingOfResume: an agent that exits before it
// answers agentctl's probe fails its session's start, and neither the
// session's status nor GET /v1/agents takes that for an agent that cannot
// resume (it was recorded as one, since agentctl had come up: "This agent
// cannot resume previous sessions", and a resume refused for good).
func TestAFailedProbeSaysNothingOfResume(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, testToken, func(_ int, cfg *config.Config) {
		cfg.Agents = append(cfg.Agents, &config.Agent{Name: "demo-broken", Protocol: config.ProtocolACP,
			Command: []string{"sh", "-c", "exit 3"}, Permission: config.PermissionDeny})
	})
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "probe fails"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo-broken", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	var failed *api.Session
	testkit.WaitFor(t, 30*time.Second, "the session to fail", testkit.Cond(func() bool {
		failed, err = cl.GetSession(ctx(t), s.ID)
		return err == nil && failed.State == api.SessionError
	}))
	if !strings.Contains(failed.ErrorMessage, "probe") {
		t.Fatalf("error_message %q, want the failed probe", failed.ErrorMessage)
	}
	st, err := cl.SessionStatus(ctx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResumeReason == nil || *st.ResumeReason == api.ReasonNotResumable {
		t.Fatalf("resume_reason %v after a failed probe, want one that does not say the agent cannot resume", strOrNil(st.ResumeReason))
	}
	if _, err := cl.Resume(ctx(t), s.ID); err == nil || strings.Contains(err.Error(), state.ResumeMessage(api.ReasonNotResumable)) {
		t.Fatalf("resume after a failed probe: %v, want a refusal that does not say the agent cannot resume", err)
	}
	agents, err := cl.Agents(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		if a.Name == "demo-broken" && (a.ResumeSupport != "unknown" || a.SupportsSessionResume != nil) {
			t.Fatalf("GET /v1/agents: demo-broken %s/%v after a failed probe, want unknown", a.ResumeSupport, a.SupportsSessionResume)
		}
	}
}

func strOrNil(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

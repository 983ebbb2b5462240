package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// frontDoor is what a person's browser reaches a cluster through: one
// address in front of every node (a load balancer). It sends each new
// connection to the first node of its order that accepts it, so a request
// reaches a survivor once a node is gone. It keeps the browser's Host, as a
// load balancer does.
type frontDoor struct {
	mu    sync.Mutex
	order []string // host:port, preferred first
	srv   *httptest.Server
}

func newFrontDoor(t *testing.T, nodes []*harness.Node) *frontDoor {
	t.Helper()
	f := &frontDoor{}
	for _, n := range nodes {
		f.order = append(f.order, n.HTTP)
	}
	var d net.Dialer
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			f.mu.Lock()
			order := append([]string(nil), f.order...)
			f.mu.Unlock()
			var err error
			for _, addr := range order {
				var c net.Conn
				if c, err = d.DialContext(ctx, network, addr); err == nil {
					return c, nil
				}
			}
			return nil, err
		},
		MaxIdleConnsPerHost: 8,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "cluster"}) // the dialer picks the node
			r.Out.Host = r.In.Host
		},
		Transport:     transport,
		FlushInterval: -1,
	}
	f.srv = httptest.NewServer(proxy)
	t.Cleanup(f.srv.Close)
	return f
}

// TestWebUIFailover: with the session page open through the front door of a
// three-node cluster, kill -9 the leader it was talking to. The page
// reconnects by itself through a survivor, shows "Session resumed", and the
// terminal goes on in the same shell.
func TestWebUIFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx := browser(t)
	c, _ := uiNode(t, 3, true)
	leader := leaderOf(t, c)
	api, err := client.New(leader.URL(), uiToken)
	if err != nil {
		t.Fatal(err)
	}
	// The session runs on the leader's node (its agentctl outlives the
	// supervisor), and the front door prefers the leader.
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "failover"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone",
		RuntimeOptions: map[string]string{"node": leader.Name}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
	order := []*harness.Node{leader}
	for _, n := range c.Nodes {
		if n != leader {
			order = append(order, n)
		}
	}
	door := newFrontDoor(t, order)

	p := page{t: t, ctx: ctx}
	p.open(door.srv.URL + "/ui/sessions/" + s.ID)
	p.find("region", "Terminal")
	p.fill("textbox", "Prompt", "remember plums")
	p.click("button", "Send")
	p.waitText("ol.messages", "ok, remembering plums")
	pid := p.termPID("before")

	// What the terminal's notice says along the way.
	p.run("watch the notice", chromedp.Evaluate(`window.notices = [];
		new MutationObserver(() => window.notices.push(document.querySelector('[aria-label="Terminal"] .term-notice').textContent))
			.observe(document.querySelector('[aria-label="Terminal"] .term-notice'), {subtree: true, childList: true, characterData: true}); 0`, nil))

	leader.Kill()
	newLeader := leaderOf(t, c)
	if newLeader == leader {
		t.Fatal("the killed node still leads")
	}
	p.waitText(".term-notice", "Session resumed")
	var notices []string
	p.run("read the notices", chromedp.Evaluate(`window.notices`, &notices))
	if !slices.Contains(notices, "Reconnecting…") {
		t.Fatalf("the terminal's notices were %q, want Reconnecting… before Session resumed", notices)
	}
	if got := p.termPID("after"); got != pid {
		t.Fatalf("shell pid %s after the failover, want the same %s", got, pid)
	}
	// The conversation goes on too, through the new leader.
	napi, err := client.New(newLeader.URL(), uiToken)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "the session to be usable after the failover", testkit.Cond(func() bool {
		st, err := napi.SessionStatus(testCtx(t), s.ID)
		return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	p.fill("textbox", "Prompt", "recall")
	p.click("button", "Send")
	p.waitText("ol.messages", "you asked me to remember: plums")
	p.screenshot("failover.png")
}

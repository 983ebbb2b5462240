package agentctl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestChatControllerLease: a chat registers as the conversation's
// controller and renews it (keeping its since); another client is refused
// unless it takes over; a release by a nonce that does not hold it is
// refused, by the holder's it ends the registration; an unrenewed
// registration lapses after the TTL; GET /v1/agent carries it; a malformed
// identity is refused.
func TestChatControllerLease(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	_, _, c := inProcess(t, agentctl.Options{ChatControllerTTL: ttl})
	if got, err := c.ChatController(ctx(t)); err != nil || got != nil {
		t.Fatalf("before any chat: %+v %v", got, err)
	}
	a := api.ClientID{Host: "laptop", PID: 100, Nonce: "nonce-a"}
	b := api.ClientID{Host: "desktop", PID: 200, Nonce: "nonce-b"}

	// Register.
	before := time.Now()
	first, err := c.ClaimChatController(ctx(t), a, false)
	if err != nil {
		t.Fatal(err)
	}
	if first.Host != a.Host || first.PID != a.PID || first.Nonce != a.Nonce || first.Since.Before(before.Add(-time.Second)) ||
		first.Expires.Sub(first.Since) < ttl-100*time.Millisecond || first.Expires.Sub(first.Since) > ttl+100*time.Millisecond {
		t.Fatalf("registration %+v, want %+v since about now for %s", first, a, ttl)
	}
	if st, err := c.AgentState(ctx(t)); err != nil || st.ChatController == nil || st.ChatController.Nonce != a.Nonce {
		t.Fatalf("GET /v1/agent's chat controller: %+v %v", st.ChatController, err)
	}

	// Renewals keep it past the TTL, with its first since.
	var renewed agentctl.ChatController
	for start := time.Now(); time.Since(start) < 2*ttl; {
		if renewed, err = c.ClaimChatController(ctx(t), a, false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 3) // the gap between renewals under test, not a synchronisation
	}
	if !renewed.Since.Equal(first.Since) || !renewed.Expires.After(first.Expires) {
		t.Fatalf("renewal %+v: since must stay %s and expires move past %s", renewed, first.Since, first.Expires)
	}

	// Another client is refused, and told who holds it.
	_, err = c.ClaimChatController(ctx(t), b, false)
	if ae := apiErr(t, err); ae.Status != 409 || !strings.Contains(ae.Message, "in chat on laptop (pid 100)") {
		t.Fatalf("a second chat without takeover: %+v", ae)
	}
	// A release by the wrong nonce is refused and changes nothing.
	err = c.ReleaseChatController(ctx(t), b.Nonce)
	if ae := apiErr(t, err); ae.Status != 409 {
		t.Fatalf("release by another nonce: %+v", ae)
	}
	if got, _ := c.ChatController(ctx(t)); got == nil || got.Nonce != a.Nonce {
		t.Fatalf("after a refused release: %+v", got)
	}
	// A release without a nonce is a bad request.
	if ae := apiErr(t, c.ReleaseChatController(ctx(t), "")); ae.Status != 400 {
		t.Fatalf("release without a nonce: %+v", ae)
	}

	// A takeover replaces the holder, with a since of its own; the old
	// holder's renewal is then refused.
	took, err := c.ClaimChatController(ctx(t), b, true)
	if err != nil {
		t.Fatal(err)
	}
	if took.Nonce != b.Nonce || !took.Since.After(first.Since) {
		t.Fatalf("takeover %+v", took)
	}
	if _, err := c.ClaimChatController(ctx(t), a, false); apiErr(t, err).Status != 409 {
		t.Fatal("the replaced chat renewed over the new holder")
	}

	// The holder's release ends it; releasing again is a no-op.
	if err := c.ReleaseChatController(ctx(t), b.Nonce); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ChatController(ctx(t)); err != nil || got != nil {
		t.Fatalf("after the release: %+v %v", got, err)
	}
	if err := c.ReleaseChatController(ctx(t), b.Nonce); err != nil {
		t.Fatalf("release of nothing: %v", err)
	}

	// Unrenewed, a registration lapses after the TTL (not before), and
	// the session is free for anyone.
	held, err := c.ClaimChatController(ctx(t), a, false)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 3*ttl, "the unrenewed registration to lapse", testkit.Cond(func() bool {
		got, err := c.ChatController(ctx(t))
		return err == nil && got == nil
	}))
	if time.Now().Before(held.Expires) {
		t.Fatalf("the registration lapsed before its expiry %s", held.Expires)
	}
	if _, err := c.ClaimChatController(ctx(t), b, false); err != nil {
		t.Fatalf("a new chat after the lapse: %v", err)
	}

	// Malformed identities are refused.
	for _, bad := range []api.ClientID{
		{Host: "", PID: 1, Nonce: "n"},
		{Host: "h", PID: 0, Nonce: "n"},
		{Host: "h", PID: 1, Nonce: ""},
		{Host: "evil\x1b[2J", PID: 1, Nonce: "n"},
		{Host: "h", PID: 1, Nonce: strings.Repeat("n", termproto.MaxClientNonce+1)},
	} {
		if _, err := c.ClaimChatController(ctx(t), bad, true); apiErr(t, err).Status != 400 {
			t.Errorf("identity %+v was not refused with 400: %v", bad, err)
		}
	}
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// A running `paddock chat` is its session's conversation controller, as an
// attached `paddock attach` is the controller of a pty agent's terminal:
// it registers its identity (self) with the session's agentctl through the
// server, renews the registration every chatRenewEvery while it runs and
// releases it when it leaves. The registration lapses 15 s after the last
// renewal, so a chat that crashed stops counting by itself. The status
// object's controller then says "chat", which the picker and the web page
// show, and a second chat asks before it takes the session over.

// chatRenewEvery is how often a chat renews its registration: three
// renewals fit in the 15 s it lasts, so one lost renewal costs nothing.
const chatRenewEvery = 5 * time.Second

// chatReleaseTimeout bounds the release as the chat leaves.
const chatReleaseTimeout = 3 * time.Second

// claimChat registers this chat as the session's conversation controller.
// A session another live client controls is taken over only after the user
// says yes on the terminal (or with force); without a terminal to ask on,
// it is refused. A registration that fails for any other reason (the
// session's agentctl does not run yet) is not fatal: the renewals try again.
func (e *env) claimChat(ctx context.Context, c *client.Client, id string, force, tty bool) error {
	takeover := force
	if st, err := c.SessionStatus(ctx, id); err == nil && st.Controller != nil {
		switch ownerOf(st.Controller) {
		case ownerOther:
			if !force {
				if err := e.askChatTakeover(st.Controller, tty); err != nil {
					return err
				}
			}
			takeover = true
		case ownerSelf, ownerDead:
			// This process (the picker's handoff keeps its identity), or
			// a chat of this host that is gone: nobody to ask.
			takeover = true
		}
	}
	_, err := c.ClaimController(ctx, id, self(), takeover)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		// Another chat registered between the question and the claim.
		return fmt.Errorf("%s; -force takes it over", ae.Message)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "[paddock] this chat is not registered as the session's controller yet (%s); it tries again every %s\n",
			noControls(err.Error(), ""), chatRenewEvery)
	}
	return nil
}

// controllerWords says who controls a session and how, for a question or
// a notice: "in chat on HOST (pid N) since T".
func controllerWords(ctl *api.Controller) string {
	who := "a client that did not say who it is"
	if ctl.Host != "" {
		who = fmt.Sprintf("%s (pid %d)", noControls(ctl.Host, ""), ctl.PID)
	}
	since := ctl.Since.Local().Format("15:04:05")
	if ctl.Via == api.ViaChat {
		return fmt.Sprintf("in chat on %s since %s", who, since)
	}
	return fmt.Sprintf("attached to its agent terminal on %s since %s", who, since)
}

// askChatTakeover asks before opening a session another live client
// controls (opening it takes it over); without a terminal it refuses.
func (e *env) askChatTakeover(ctl *api.Controller, tty bool) error {
	return e.askBeforeTakingOver("this session is "+controllerWords(ctl), tty, "not opened; the other client keeps the session")
}

// holdController renews the chat's registration until ctx ends, telling
// the chat (notes) when another client has taken the session over and
// when this chat holds it again (once the other left). Renewals never take
// the session back from another client.
func (ch *chat) holdController(ctx context.Context, notes chan<- string) {
	me := self()
	t := time.NewTicker(chatRenewEvery)
	defer t.Stop()
	lost := false
	note := func(s string) {
		select {
		case notes <- s:
		case <-ctx.Done():
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := ch.c.ClaimController(ctx, ch.id, me, false)
		var ae *client.APIError
		switch {
		case err == nil && lost:
			lost = false
			note("this chat holds the session again")
		case errors.As(err, &ae) && ae.Status == http.StatusConflict && !lost:
			lost = true
			msg := "another client took this session over"
			if st, err := ch.c.SessionStatus(ctx, ch.id); err == nil && st.Controller != nil && ownerOf(st.Controller) == ownerOther {
				msg = "the session is now " + controllerWords(st.Controller)
			}
			note(msg + "; this chat carries on without holding it")
		}
	}
}

// releaseController ends the chat's registration as it leaves, so the
// session is free at once rather than when the registration lapses.
func (ch *chat) releaseController() {
	ctx, cancel := context.WithTimeout(context.Background(), chatReleaseTimeout)
	defer cancel()
	_ = ch.c.ReleaseController(ctx, ch.id, self().Nonce)
}

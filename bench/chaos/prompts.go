package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	wire "github.com/paddockhq/paddock/api"
)

// Demo agent replies (package shared/demoagent lists them).
const (
	rememberReply = "ok, remembering "
	recallReply   = "you asked me to remember: "
	recallNothing = "nothing to recall"
)

// promptTimeout bounds a prompt call (the API may wait up to 10 s for a
// session that recovery is bringing back).
const promptTimeout = 12 * time.Second

// Prompt is one prompt the run sent that the cluster accepted (202), and
// what became of it.
type Prompt struct {
	SessionID string
	// Word is what the prompt "remember WORD" asked the agent to remember.
	Word string
	// Sent is when the request went out; Seen when its outcome was
	// observed (the session waiting for input again).
	Sent, Seen time.Time
	// Answered is set when the reply "ok, remembering WORD" was seen,
	// complete, among the session's messages.
	Answered bool

	waitingSince time.Time // first seen waiting without the reply
}

// prompter sends "remember WORD" prompts to one session, one at a time, and
// records whether each was answered, until fctx ends or the session has had
// PromptsPerSession prompts.
func (r *runner) prompter(fctx context.Context, i int, id string, rng *rand.Rand) {
	for n := 0; n < r.o.PromptsPerSession && fctx.Err() == nil; {
		leader, err := r.leader(fctx, 5*time.Second)
		if err != nil {
			continue
		}
		api := r.api(leader)
		s, err := bounded(fctx, func(c context.Context) (*wire.Session, error) { return api.GetSession(c, id) })
		if err != nil || s.State != wire.SessionWaitingForInput {
			sleepCtx(fctx, 200*time.Millisecond)
			continue
		}
		word := fmt.Sprintf("s%dw%d", i, n)
		n++
		r.mu.Lock()
		r.words[id] = append(r.words[id], word)
		r.mu.Unlock()
		p := &Prompt{SessionID: id, Word: word, Sent: time.Now()}
		if _, err := boundedBy(fctx, promptTimeout, func(c context.Context) (struct{}, error) {
			return struct{}{}, api.Prompt(c, id, "remember "+word)
		}); err != nil {
			// Refused or failed: not counted (it may still have reached the
			// agent; the final recall allows for that).
			r.mu.Lock()
			r.promptErrs++
			r.mu.Unlock()
			sleepCtx(fctx, 300*time.Millisecond)
			continue
		}
		r.mu.Lock()
		r.outstanding[id] = p
		r.mu.Unlock()
		for fctx.Err() == nil && !r.outcome(fctx, p) {
			sleepCtx(fctx, 150*time.Millisecond)
		}
		sleepCtx(fctx, time.Duration(200+rng.IntN(600))*time.Millisecond)
	}
}

// outcome checks an outstanding prompt once; true when it is resolved.
// Once the session waits for input again the turn has ended: the supervisor
// records a turn's messages before it returns to WAITING_FOR_INPUT, and a
// resumed agent replays its conversation first. A session seen waiting
// without the reply is looked at again a second later before the prompt
// counts as unanswered.
func (r *runner) outcome(ctx context.Context, p *Prompt) bool {
	leader, err := r.leader(ctx, 5*time.Second)
	if err != nil {
		return false
	}
	api := r.api(leader)
	s, err := bounded(ctx, func(c context.Context) (*wire.Session, error) { return api.GetSession(c, p.SessionID) })
	if err != nil || s.State != wire.SessionWaitingForInput {
		return false
	}
	msgs, err := bounded(ctx, func(c context.Context) ([]wire.Message, error) { return api.Messages(c, p.SessionID) })
	if err != nil {
		return false
	}
	now := time.Now()
	switch {
	case hasAgentText(msgs, rememberReply+p.Word):
		p.Answered = true
		r.usable(p.SessionID, now)
	case p.waitingSince.IsZero():
		p.waitingSince = now
		return false
	case now.Sub(p.waitingSince) < time.Second:
		return false
	}
	p.Seen = now
	r.mu.Lock()
	delete(r.outstanding, p.SessionID)
	r.prompts = append(r.prompts, *p)
	r.mu.Unlock()
	return true
}

// hasAgentText reports a complete agent message with exactly text.
func hasAgentText(msgs []wire.Message, text string) bool {
	for _, m := range msgs {
		if m.Role == wire.RoleAgent && m.Complete && m.Text == text {
			return true
		}
	}
	return false
}

// resolveOutstanding settles the prompts still open when the fault phase
// ended (the sessions have been brought back by then). One that cannot be
// resolved within bound (for all of them) is recorded unanswered as of now.
func (r *runner) resolveOutstanding(ctx context.Context, bound time.Duration) {
	r.mu.Lock()
	var open []*Prompt
	for _, p := range r.outstanding {
		open = append(open, p)
	}
	r.mu.Unlock()
	deadline := time.Now().Add(bound)
	for _, p := range open {
		for ctx.Err() == nil && time.Now().Before(deadline) && !r.outcome(ctx, p) {
			sleepCtx(ctx, 150*time.Millisecond)
		}
		r.mu.Lock()
		if _, still := r.outstanding[p.SessionID]; still {
			p.Seen = time.Now()
			delete(r.outstanding, p.SessionID)
			r.prompts = append(r.prompts, *p)
		}
		r.mu.Unlock()
	}
}

// finalRecalls asks every session "recall" and returns the words each
// answered with; a session that never answers within bound is missing.
func (r *runner) finalRecalls(ctx context.Context, bound time.Duration) map[string][]string {
	var mu sync.Mutex
	out := map[string][]string{}
	deadline := time.Now().Add(bound)
	var wg sync.WaitGroup
	for _, id := range r.sessionList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			words, err := r.recall(ctx, id, deadline)
			if err != nil {
				r.logf("chaos: session %s never answered the final recall (%v): %s", id, err, r.describe(ctx, id))
				return
			}
			mu.Lock()
			out[id] = words
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// recall prompts "recall" until the session answers (or deadline); the
// error says what went wrong last.
func (r *runner) recall(ctx context.Context, id string, deadline time.Time) ([]string, error) {
	last := errors.New("no attempt")
	for ctx.Err() == nil && time.Now().Before(deadline) {
		leader, err := r.leader(ctx, 5*time.Second)
		if err != nil {
			last = err
			continue
		}
		api := r.api(leader)
		s, err := bounded(ctx, func(c context.Context) (*wire.Session, error) { return api.GetSession(c, id) })
		if err != nil || s.State != wire.SessionWaitingForInput {
			last = fmt.Errorf("session: %v %v", s, err)
			if err == nil {
				last = fmt.Errorf("session is %s", s.State)
			}
			r.resumeStuck(ctx, leader)
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		before, err := bounded(ctx, func(c context.Context) ([]wire.Message, error) { return api.Messages(c, id) })
		if err != nil {
			last = err
			continue
		}
		old := map[string]bool{}
		for _, m := range before {
			old[m.ID+"\x00"+m.Text] = true
		}
		if _, err := boundedBy(ctx, promptTimeout, func(c context.Context) (struct{}, error) {
			return struct{}{}, api.Prompt(c, id, "recall")
		}); err != nil {
			last = fmt.Errorf("prompt: %w", err)
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		last = errors.New("the recall turn ended without an answer")
		turnEnd := time.Now().Add(15 * time.Second)
		var waiting time.Time
		for ctx.Err() == nil && time.Now().Before(turnEnd) {
			sleepCtx(ctx, 150*time.Millisecond)
			s, err := bounded(ctx, func(c context.Context) (*wire.Session, error) { return api.GetSession(c, id) })
			if err != nil || s.State != wire.SessionWaitingForInput {
				continue
			}
			msgs, err := bounded(ctx, func(c context.Context) ([]wire.Message, error) { return api.Messages(c, id) })
			if err != nil {
				continue
			}
			if words, ok := recallAnswer(msgs, old); ok {
				return words, nil
			}
			if waiting.IsZero() {
				waiting = time.Now()
			} else if time.Since(waiting) > time.Second {
				break // the turn ended without an answer: ask again
			}
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, last
}

// recallAnswer finds a new complete recall reply among msgs and returns
// the words it lists.
func recallAnswer(msgs []wire.Message, old map[string]bool) ([]string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != wire.RoleAgent || !m.Complete || old[m.ID+"\x00"+m.Text] {
			continue
		}
		if m.Text == recallNothing {
			return []string{}, true
		}
		if rest, ok := strings.CutPrefix(m.Text, recallReply); ok {
			return strings.Split(rest, ", "), true
		}
	}
	return nil, false
}

// describe is a session's state, error and lease, for the log.
func (r *runner) describe(ctx context.Context, id string) string {
	leader, err := r.leader(ctx, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	api := r.api(leader)
	s, err := bounded(ctx, func(c context.Context) (*wire.Session, error) { return api.GetSession(c, id) })
	if err != nil {
		return err.Error()
	}
	l, err := bounded(ctx, func(c context.Context) (*wire.Lease, error) { return api.Lease(c, id) })
	lease := fmt.Sprint(err)
	if err == nil {
		lease = fmt.Sprintf("%s token %d holder %s", l.State, l.FencingToken, l.HolderExecutorID)
	}
	exec := "none"
	if s.ExecutorID != "" {
		ex, err := bounded(ctx, func(c context.Context) (*wire.Executor, error) { return api.Executor(c, s.ExecutorID) })
		exec = fmt.Sprint(err)
		if err == nil {
			exec = fmt.Sprintf("%s (status %s, nonce %q, pid %d, supports_session_resume %v)", ex.ID, ex.Status, ex.Nonce, ex.PID, ex.SupportsSessionResume)
		}
	}
	return fmt.Sprintf("state %s (%s), executor %s, lease %s", s.State, s.ErrorMessage, exec, lease)
}

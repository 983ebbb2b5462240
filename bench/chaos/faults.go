package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
)

// leaderInjector injects leader faults one at a time until fctx ends or the
// target (with its own minimum) is reached. Holds run on ctx, so a fault
// under way when fctx ends is still held and undone as planned.
func (r *runner) leaderInjector(ctx, fctx context.Context, rng *rand.Rand) {
	kinds := []string{KillLeader, PauseLeader}
	if r.nw != nil {
		kinds = append(kinds, CutLeader)
	}
	for fctx.Err() == nil {
		leader, err := r.leader(fctx, 20*time.Second)
		if err != nil {
			continue
		}
		kind := kinds[rng.IntN(len(kinds))]
		if err := r.leaderFault(ctx, kind, leader, rng); err != nil {
			r.logf("chaos: %s of %s: %v", kind, leader.Name, err)
		} else {
			r.count(kind)
		}
		_, _ = r.leader(fctx, 20*time.Second)
		r.awaitSessions(fctx, 2*r.o.TTL+4*time.Second)
		sleepCtx(fctx, time.Duration(100+rng.IntN(300))*time.Millisecond)
	}
}

// leaderFault injects one leader fault and undoes it.
func (r *runner) leaderFault(ctx context.Context, kind string, leader *harness.Node, rng *rand.Rand) error {
	switch kind {
	case KillLeader:
		leader.Kill()
		r.setDown(leader, kind)
		// Restart it once the others have a leader (or a bound passed),
		// and wait for its API so that the cluster has three members again
		// before the next leader fault.
		_, _ = r.leader(ctx, 10*time.Second)
		r.setUp(leader)
		if err := leader.Start(); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !answers(leader) && time.Now().Before(deadline) && ctx.Err() == nil {
			sleepCtx(ctx, 50*time.Millisecond)
		}
		return nil
	case PauseLeader:
		if err := leader.Signal(syscall.SIGSTOP); err != nil {
			return fmt.Errorf("SIGSTOP: %w", err)
		}
		r.setDown(leader, kind)
		sleepCtx(ctx, r.hold(rng))
		r.setUp(leader)
		if err := leader.Signal(syscall.SIGCONT); err != nil {
			return fmt.Errorf("SIGCONT: %w", err)
		}
		return nil
	case CutLeader:
		i := r.index(leader)
		if err := r.nw.Cut(i); err != nil {
			return fmt.Errorf("cut: %w", err)
		}
		r.setDown(leader, kind)
		sleepCtx(ctx, r.hold(rng))
		r.setUp(leader)
		if err := r.nw.Heal(i); err != nil {
			return fmt.Errorf("heal: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// hold is how long a leader stays paused or cut: half the time shorter
// than the lease TTL (it comes back as a deposed leader whose leases are
// still valid), half the time longer (its leases expire, agentctl
// self-fences, and the sessions are resumed elsewhere). The short band
// starts at 0.6 s, past raft's 300 ms election timeout.
func (r *runner) hold(rng *rand.Rand) time.Duration {
	ttl := r.o.TTL
	if rng.IntN(2) == 0 {
		lo, hi := 600*time.Millisecond, ttl-300*time.Millisecond
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	return ttl + 200*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))
}

// sessionInjector kill -9s a random session's agentctl every 150–500 ms (a
// session found in no state to take one is looked for again 100 ms later)
// until fctx ends or the total target is reached. It picks only sessions
// that wait for input or run a turn (not mid-resume) and whose executor's
// process really is that session's agentctl and has run for at least
// minAgentctlAge.
func (r *runner) sessionInjector(fctx context.Context, rng *rand.Rand) {
	pace := func() time.Duration { return time.Duration(150+rng.IntN(350)) * time.Millisecond }
	next := time.Now().Add(pace())
	for fctx.Err() == nil && !r.reached() {
		sleepCtx(fctx, time.Until(next))
		if fctx.Err() != nil || r.reached() {
			return
		}
		err := r.killAgentctl(fctx, rng)
		switch {
		case err == nil:
			// The pace runs from one kill to the next, however long the
			// lookup took.
			next = next.Add(pace())
			if now := time.Now(); next.Before(now) {
				next = now
			}
		case errors.Is(err, errNoTarget):
			r.mu.Lock()
			r.noTarget++
			r.mu.Unlock()
			next = time.Now().Add(100 * time.Millisecond)
		default:
			if fctx.Err() == nil {
				r.logf("chaos: %s: %v", KillAgentctl, err)
			}
			next = time.Now().Add(100 * time.Millisecond)
		}
	}
}

// minAgentctlAge is how long an agentctl has run before the session
// injector may kill it: a session just brought back gets the time to take a
// prompt before its next fault.
const minAgentctlAge = 500 * time.Millisecond

// errNoTarget: no session was in a state to take a session fault.
var errNoTarget = errors.New("no session to fault")

// killAgentctl kills one eligible session's agentctl and counts the fault.
func (r *runner) killAgentctl(ctx context.Context, rng *rand.Rand) error {
	leader, err := r.leader(ctx, 2*time.Second)
	if err != nil {
		return errNoTarget
	}
	api := r.api(leader)
	at := time.Now()
	ss, err := r.listSessions(ctx, api)
	if err != nil {
		return errNoTarget
	}
	exs, err := bounded(ctx, func(c context.Context) ([]wire.Executor, error) { return api.Executors(c, "") })
	if err != nil {
		return errNoTarget
	}
	byID := map[string]wire.Executor{}
	for _, ex := range exs {
		byID[ex.ID] = ex
	}
	type target struct {
		session string
		pid     int
	}
	var targets []target
	for _, s := range ss {
		if (s.State != wire.SessionWaitingForInput && s.State != wire.SessionRunning) || s.ExecutorID == "" {
			continue
		}
		ex, ok := byID[s.ExecutorID]
		if !ok || ex.Status != wire.ExecutorReady || ex.PID <= 0 || !isAgentctl(ex.PID, s.ID) {
			continue
		}
		r.usable(s.ID, at)
		if born, ok := procStart(ex.PID); !ok || time.Since(born) < minAgentctlAge {
			continue
		}
		targets = append(targets, target{s.ID, ex.PID})
	}
	if len(targets) == 0 {
		return errNoTarget
	}
	t := targets[rng.IntN(len(targets))]
	if err := syscall.Kill(t.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill agentctl %d of %s: %w", t.pid, t.session, err)
	}
	r.count(KillAgentctl)
	return nil
}

// tender resumes sessions left ERROR or STOPPED (auto_resume brings most
// back by itself; a manual resume racing it is refused with a conflict).
func (r *runner) tender(fctx context.Context) {
	for i := 0; fctx.Err() == nil; i++ {
		if l, err := r.leader(fctx, 5*time.Second); err == nil {
			r.resumeStuck(fctx, l)
			if i%5 == 0 {
				r.replaceLost(fctx, l)
			}
		}
		sleepCtx(fctx, 300*time.Millisecond)
	}
}

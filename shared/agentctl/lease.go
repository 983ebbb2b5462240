package agentctl

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Self-fencing. The supervisor's leader renews the session's lease on
// agentctl (POST /v1/lease, fenced) every fraction of its TTL, or with an
// events poll that asks for it (GET /v1/events?lease=TTL, fenced as well):
// a session whose events are polled often needs no renewals of its own. Once a renewal
// has been seen, agentctl stops the agent by itself when renewals stop for
// longer than the TTL minus a safety margin: the leader reclaims a lease only
// after a full TTL without renewal, so the old agent is gone before a new
// execution can start elsewhere (an old leader cut off by a partition never
// keeps a second live agent). Before the first renewal there is no deadline,
// so agentctl used on its own is unaffected.

// LeaseRequest is the body of POST /v1/lease.
type LeaseRequest struct {
	TTLMillis int64 `json:"ttl_ms"`
}

// LeaseResponse answers POST /v1/lease.
type LeaseResponse struct {
	FencingToken uint64    `json:"fencing_token"`
	Deadline     time.Time `json:"deadline"`
	// Nonce is this agentctl's boot nonce: a renewal only counts for the
	// holder the lease names.
	Nonce string `json:"nonce"`
}

// EventLeaseExpired is published when agentctl stops its agent because the
// lease was not renewed in time.
const EventLeaseExpired = "lease_expired"

// SelfFenceLog is the line agentctl logs when it stops its agent because
// the lease was not renewed in time (a benchmark reading agentctl's log
// tells an interrupted turn from a lost one by it).
const SelfFenceLog = "lease not renewed in time: stopping the agent (self-fencing)"

// selfFenceMargin is how much earlier than the TTL agentctl stops its agent.
func selfFenceMargin(ttl time.Duration) time.Duration {
	return min(ttl/5, 2*time.Second)
}

// leaseWatch stops the agent when its lease deadline passes.
type leaseWatch struct {
	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	expire   func()
}

// renew moves the deadline to now + ttl - margin and returns it.
func (l *leaseWatch) renew(ttl time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = time.Now().Add(ttl - selfFenceMargin(ttl))
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(l.deadline), l.fire)
	} else {
		l.timer.Reset(time.Until(l.deadline))
	}
	return l.deadline
}

func (l *leaseWatch) fire() {
	l.mu.Lock()
	late := !l.deadline.IsZero() && !time.Now().Before(l.deadline)
	if late {
		l.deadline = time.Time{}
	}
	l.mu.Unlock()
	if late {
		l.expire()
	}
}

func (l *leaseWatch) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
}

// renewLease handles POST /v1/lease (fenced: a stale leader cannot renew).
func (s *Server) renewLease(w http.ResponseWriter, r *http.Request) {
	var req LeaseRequest
	if err := DecodeJSON(r.Body, &req); err != nil {
		writeError(w, 400, CodeBadRequest, err.Error())
		return
	}
	ttl := time.Duration(req.TTLMillis) * time.Millisecond
	if !leaseTTLInRange(ttl) {
		writeError(w, 400, CodeBadRequest, "ttl_ms must be between 100 and 3600000")
		return
	}
	deadline := s.lease.renew(ttl)
	writeJSON(w, 200, LeaseResponse{FencingToken: s.fence.Highest(), Deadline: deadline, Nonce: s.nonce})
}

// leaseTTLInRange bounds the TTL a renewal may ask for.
func leaseTTLInRange(ttl time.Duration) bool {
	return ttl >= 100*time.Millisecond && ttl <= time.Hour
}

// selfFence stops the agent after a missed lease deadline.
func (s *Server) selfFence() {
	if st := s.mgr.state(); st.Status != StatusWaitingForInput && st.Status != StatusRunning && st.Status != StatusStarting {
		return
	}
	s.log.Warn(SelfFenceLog)
	s.events.publish(EventLeaseExpired, map[string]string{"message": "the supervisor stopped renewing this session's lease; the agent was stopped so that no second execution can overlap"})
	if _, err := s.mgr.stop(); err != nil {
		s.log.Warn("self-fencing stop", "error", err)
	}
}

// RenewLease calls POST /v1/lease with the client's fencing token.
func (c *Client) RenewLease(ctx context.Context, ttl time.Duration) (LeaseResponse, error) {
	var v LeaseResponse
	return v, c.doJSON(ctx, "POST", "/v1/lease", LeaseRequest{TTLMillis: ttl.Milliseconds()}, &v)
}

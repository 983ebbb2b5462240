package agentctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl/acpagent"
)

// Permission requests: an ACP agent asks before a tool call runs. The
// profile's policy answers at once (allow, deny, auto_allow kinds) or the
// request waits for a person (ask) until answered through
// POST /v1/agent/permissions/{id}, the profile's permission_timeout passes
// (its reject option is chosen: timed_out), or the turn is cancelled, the
// agent stopped or gone (cancelled, and the agent is answered cancelled).
// Every request of the current agent run is kept, oldest first.

// Errors of answering a permission request.
var (
	// ErrPermissionNotFound: no request of the current agent run has the id.
	ErrPermissionNotFound = errors.New("no such permission request")
	// ErrPermissionNotPending: the request was already answered, timed out
	// or cancelled.
	ErrPermissionNotPending = errors.New("the permission request is not pending")
)

// permission is one request and its waiter's wake-up.
type permission struct {
	rec api.Permission
	// done is closed when the request ends (rec is then final).
	done  chan struct{}
	timer *time.Timer
}

func newPermissionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "perm-" + hex.EncodeToString(b[:])
}

// pickOption is the id of the first option of the first kind of kinds
// that the request offers ("" when none).
func pickOption(opts []api.PermissionOption, kinds ...string) string {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

// onPermission answers one request of the agent: the option chosen, or ""
// for cancelled. It blocks while a person is asked.
func (m *manager) onPermission(ctx context.Context, req acpagent.PermissionRequest) string {
	m.mu.Lock()
	// The request's toolCall is an update of the call it asks about.
	tc := m.mergeToolCall(req.ToolCall)
	p := &permission{done: make(chan struct{}), rec: api.Permission{
		ID: newPermissionID(), ToolCallID: req.ToolCall.ID, Kind: api.ToolOther, Options: req.Options,
		State: api.PermissionPending, CreatedAt: time.Now().UTC(),
	}}
	if tc != nil {
		p.rec.Title, p.rec.Kind = tc.Title, tc.Kind
	} else {
		if req.ToolCall.Title != nil {
			p.rec.Title = *req.ToolCall.Title
		}
		if req.ToolCall.Kind != nil {
			p.rec.Kind = *req.ToolCall.Kind
		}
	}
	if p.rec.Options == nil {
		p.rec.Options = []api.PermissionOption{}
	}
	m.perms = append(m.perms, p)
	allow := pickOption(p.rec.Options, api.OptionAllowOnce, api.OptionAllowAlways)
	reject := pickOption(p.rec.Options, api.OptionRejectOnce, api.OptionRejectAlways)
	switch policy := m.profile.Permission; {
	case allow != "" && slices.Contains(m.profile.AutoAllow, string(p.rec.Kind)):
		m.endPermission(p, api.PermissionAnswered, allow, api.AnsweredByPolicy)
	case policy == PermissionAllow:
		m.endPolicy(p, allow)
	case policy == PermissionDeny:
		m.endPolicy(p, reject)
	default:
		m.events.publish(EventPermissionRequested, PermissionData{Permission: p.rec})
		if d := m.profile.PermissionTimeout; d > 0 {
			p.timer = time.AfterFunc(d, func() {
				m.mu.Lock()
				defer m.mu.Unlock()
				m.endPermission(p, api.PermissionTimedOut, reject, "")
			})
		}
	}
	m.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done(): // the agent's connection ended
		m.mu.Lock()
		m.endPermission(p, api.PermissionCancelled, "", "")
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return p.rec.OptionID
}

// endPolicy ends a request the policy answers with opt, or cancelled when
// the agent offered no option of the policy's kind; m.mu must be held.
func (m *manager) endPolicy(p *permission, opt string) {
	if opt == "" {
		m.endPermission(p, api.PermissionCancelled, "", api.AnsweredByPolicy)
		return
	}
	m.endPermission(p, api.PermissionAnswered, opt, api.AnsweredByPolicy)
}

// endPermission ends a pending request (false when it was not pending),
// publishes permission_answered and wakes its waiter; m.mu must be held.
func (m *manager) endPermission(p *permission, state api.PermissionState, opt, by string) bool {
	if p.rec.State != api.PermissionPending {
		return false
	}
	now := time.Now().UTC()
	p.rec.State, p.rec.OptionID, p.rec.AnsweredBy, p.rec.AnsweredAt = state, opt, by, &now
	if p.timer != nil {
		p.timer.Stop()
	}
	close(p.done)
	m.events.publish(EventPermissionAnswered, PermissionData{Permission: p.rec})
	return true
}

// cancelPermissions ends every pending request cancelled; m.mu must be
// held. The agent's waiting requests are answered cancelled.
func (m *manager) cancelPermissions() {
	for _, p := range m.perms {
		m.endPermission(p, api.PermissionCancelled, "", "")
	}
}

// pendingPermissions counts the pending requests; m.mu must be held.
func (m *manager) pendingPermissions() int {
	n := 0
	for _, p := range m.perms {
		if p.rec.State == api.PermissionPending {
			n++
		}
	}
	return n
}

// permissions lists every request of the current agent run, oldest first.
func (m *manager) permissions() api.Permissions {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := api.Permissions{Permissions: make([]api.Permission, 0, len(m.perms))}
	for _, p := range m.perms {
		out.Permissions = append(out.Permissions, p.rec)
	}
	return out
}

// answerPermission answers a pending request with one of its options.
func (m *manager) answerPermission(id, optionID, by string) (api.Permission, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.perms, func(p *permission) bool { return p.rec.ID == id })
	if i < 0 {
		return api.Permission{}, fmt.Errorf("permission %q: %w", id, ErrPermissionNotFound)
	}
	p := m.perms[i]
	if p.rec.State != api.PermissionPending {
		return p.rec, fmt.Errorf("permission %q is %s: %w", id, p.rec.State, ErrPermissionNotPending)
	}
	if !slices.ContainsFunc(p.rec.Options, func(o api.PermissionOption) bool { return o.OptionID == optionID }) {
		return p.rec, fmt.Errorf("%w: permission %q offers no option %q", errBadRequest, id, optionID)
	}
	if by == "" {
		by = "user"
	}
	m.endPermission(p, api.PermissionAnswered, optionID, by)
	return p.rec, nil
}

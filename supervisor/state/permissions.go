package state

import (
	"slices"
	"sort"
	"time"

	"github.com/paddockhq/paddock/api"
)

// A session's agent asks permission before some tool calls; agentctl holds
// the request until a person (or the profile's policy, or a timeout)
// answers it. The leader's pump mirrors every request into replicated
// state, so that a request pending when the leader dies stays pending on
// every node and an answer sent to any of them afterwards reaches the agent.
// A request only moves forward: once it has ended (answered, timed out or
// cancelled) it never goes back to pending, and the first end recorded is
// kept.

// MaxPermissionsPerSession bounds a session's recorded permission requests;
// the oldest ended ones are dropped first.
const MaxPermissionsPerSession = 1000

// UpsertPermissionBody records one permission request of a session's agent:
// new, or an update of the one with its id. Permission.SessionID is set
// from SessionID.
type UpsertPermissionBody struct {
	SessionID  string         `json:"session_id"`
	Permission api.Permission `json:"permission"`
}

// CancelPermissionsBody ends every pending permission request of a session
// as cancelled: its agent exited or was stopped, so nobody waits for them.
type CancelPermissionsBody struct {
	SessionID string `json:"session_id"`
}

// permissionStates are the states a recorded request may be in.
var permissionStates = []api.PermissionState{api.PermissionPending, api.PermissionAnswered, api.PermissionCancelled, api.PermissionTimedOut}

// CmdUpsertPermission records one permission request of a session's agent
// (UpsertPermissionBody). An older node may skip it: it loses only the
// replicated copy of the requests, which the leader's pump writes again
// from agentctl.
const CmdUpsertPermission CommandType = IgnoreUnknownFlag | 20

func init() { register(CmdUpsertPermission, newBody[UpsertPermissionBody], applyUpsertPermission) }

func applyUpsertPermission(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*UpsertPermissionBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	p := b.Permission
	if p.ID == "" {
		return nil, 0, invalidf("permission id is empty")
	}
	if !slices.Contains(permissionStates, p.State) {
		return nil, 0, invalidf("permission %s: unknown state %q", p.ID, p.State)
	}
	p.SessionID = s.ID
	stamped := !p.CreatedAt.IsZero()
	if !stamped {
		p.CreatedAt = now
	}
	if p.State != api.PermissionPending && p.AnsweredAt == nil {
		at := now
		p.AnsweredAt = &at
	}
	list := d.Permissions[s.ID]
	for i, old := range list {
		if old.ID != p.ID {
			continue
		}
		if stamped && !old.CreatedAt.Equal(p.CreatedAt) {
			// The id of an agentctl boot before, reused by a later
			// request: the old record gives way to the new one.
			list[i] = &p
			return []api.Event{permissionEvent(s, requestEvent(&p), idx, &p)}, 0, nil
		}
		if old.State != api.PermissionPending || p.State == api.PermissionPending {
			// An ended request keeps its first end; a pending one seen
			// pending again is the same request.
			return nil, 0, nil
		}
		list[i] = &p
		return []api.Event{permissionEvent(s, api.EventPermissionAnswered, idx, &p)}, 0, nil
	}
	d.Permissions[s.ID] = boundPermissions(append(list, &p))
	return []api.Event{permissionEvent(s, requestEvent(&p), idx, &p)}, 0, nil
}

// requestEvent is the event of a request seen for the first time: answered
// when it had already ended (a policy's answer).
func requestEvent(p *api.Permission) string {
	if p.State != api.PermissionPending {
		return api.EventPermissionAnswered
	}
	return api.EventPermissionRequested
}

// CmdCancelPermissions ends every pending permission request of a session
// as cancelled: its agent exited or was stopped (CancelPermissionsBody).
// An older node may skip it.
const CmdCancelPermissions CommandType = IgnoreUnknownFlag | 21

func init() { register(CmdCancelPermissions, newBody[CancelPermissionsBody], applyCancelPermissions) }

func applyCancelPermissions(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*CancelPermissionsBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	return d.cancelPermissions(s, idx, now), 0, nil
}

// cancelPermissions ends a session's pending requests as cancelled and
// returns their events.
func (d *data) cancelPermissions(s *api.Session, idx uint64, now time.Time) []api.Event {
	var events []api.Event
	for i, p := range d.Permissions[s.ID] {
		if p.State != api.PermissionPending {
			continue
		}
		c := *p
		at := now
		c.State, c.OptionID, c.AnsweredAt = api.PermissionCancelled, "", &at
		d.Permissions[s.ID][i] = &c
		events = append(events, permissionEvent(s, api.EventPermissionAnswered, idx, &c))
	}
	return events
}

// boundPermissions drops the oldest ended requests beyond
// MaxPermissionsPerSession (pending ones are kept: an agent waits for them).
func boundPermissions(list []*api.Permission) []*api.Permission {
	for over := len(list) - MaxPermissionsPerSession; over > 0; over-- {
		i := slices.IndexFunc(list, func(p *api.Permission) bool { return p.State != api.PermissionPending })
		if i < 0 {
			break
		}
		list = slices.Delete(list, i, i+1)
	}
	return list
}

func permissionEvent(s *api.Session, typ string, idx uint64, p *api.Permission) api.Event {
	return sessionEvent(s, typ, idx, map[string]any{"permission": *p})
}

// Permissions returns a session's permission requests, oldest first (by
// created_at, then id).
func (s *Store) Permissions(sessionID string) []api.Permission {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.d.Permissions[sessionID]
	out := make([]api.Permission, len(list))
	for i, p := range list {
		out[i] = *p
	}
	sort.SliceStable(out, func(i, j int) bool {
		return lessByTime(out[i].CreatedAt, out[j].CreatedAt, out[i].ID, out[j].ID)
	})
	return out
}

// Permission returns one permission request of a session.
func (s *Store) Permission(sessionID, id string) (api.Permission, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.d.Permissions[sessionID] {
		if p.ID == id {
			return *p, true
		}
	}
	return api.Permission{}, false
}

// PendingPermissions counts a session's requests that wait for an answer.
func (s *Store) PendingPermissions(sessionID string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, p := range s.d.Permissions[sessionID] {
		if p.State == api.PermissionPending {
			n++
		}
	}
	return n
}

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// The session group's permission requests: list them, and answer the
// agent's pending ones (approve, deny) with one of the options it offers.

func runSessionPermissions(e *env, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Permission, error) {
		return c.Permissions(e.ctx(), pos[0], o...)
	}, func(perms []api.Permission) error {
		if len(perms) == 0 {
			fmt.Fprintf(e.stdout, "No permission requests in session %s\n", pos[0])
			return nil
		}
		now := time.Now()
		rows := make([][]string, 0, len(perms))
		for _, p := range perms {
			rows = append(rows, []string{shortID(p.ID), p.Title, string(p.Kind), string(p.State),
				chosenOption(p), p.AnsweredBy, age(p.CreatedAt, now)})
		}
		return table(e.stdout, []string{"ID", "TITLE", "KIND", "STATE", "OPTION", "ANSWERED BY", "AGE"}, rows)
	})
}

// chosenOption names the option a request was answered with: its name and,
// when they differ, its id ("" while none is chosen).
func chosenOption(p api.Permission) string {
	if p.OptionID == "" {
		return ""
	}
	if o, ok := optionByID(p, p.OptionID); ok && o.Name != "" && o.Name != o.OptionID {
		return fmt.Sprintf("%s (%s)", o.Name, o.OptionID)
	}
	return p.OptionID
}

func optionByID(p api.Permission, id string) (api.PermissionOption, bool) {
	for _, o := range p.Options {
		if o.OptionID == id {
			return o, true
		}
	}
	return api.PermissionOption{}, false
}

// permissionOptionKinds are the option kinds -option takes.
var permissionOptionKinds = []string{api.OptionAllowOnce, api.OptionAllowAlways, api.OptionRejectOnce, api.OptionRejectAlways}

func approveFlags(fs *flag.FlagSet) *string {
	return fs.String("option", api.OptionAllowOnce, "the kind of option to answer with: "+strings.Join(permissionOptionKinds, ", "))
}

func runSessionApprove(e *env, kind *string, pos []string) error {
	k := strings.TrimSpace(*kind)
	known := false
	for _, pk := range permissionOptionKinds {
		known = known || k == pk
	}
	if !known {
		return &usageError{msg: fmt.Sprintf("unknown -option %q: want one of %s", k, strings.Join(permissionOptionKinds, ", "))}
	}
	return answerPermission(e, pos, "Approved", k)
}

func runSessionDeny(e *env, pos []string) error {
	return answerPermission(e, pos, "Denied", api.OptionRejectOnce, api.OptionRejectAlways)
}

// answerPermission answers a pending permission request of the session
// pos[0] (pos[1], an id or a unique prefix of one; else the oldest pending)
// with its first option of the first of kinds it offers, and says what was
// chosen (the answered request's JSON with -json).
func answerPermission(e *env, pos []string, verb string, kinds ...string) error {
	if len(pos) == 0 {
		return &usageError{msg: "missing session ID"}
	}
	if len(pos) > 2 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", pos[2])}
	}
	sessionID, permID := pos[0], ""
	if len(pos) == 2 {
		permID = strings.TrimSpace(pos[1])
		if permID == "" {
			return &usageError{msg: "empty permission ID"}
		}
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	perms, err := c.Permissions(e.ctx(), sessionID)
	if err != nil {
		return err
	}
	p, err := pickPermission(perms, sessionID, permID)
	if errors.Is(err, errNonePending) {
		p, err = awaitPermission(e, c, sessionID, err)
	}
	if err != nil {
		return err
	}
	opt, err := optionOfKind(p, kinds...)
	if err != nil {
		return err
	}
	var raw []byte
	answered, err := c.AnswerPermission(e.ctx(), sessionID, p.ID, opt.OptionID, client.CaptureBody(&raw))
	if err != nil {
		return fmt.Errorf("answer permission request %s (%q) with %s: %w", shortID(p.ID), oneLineText(p.Title), opt.OptionID, err)
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "%s permission request %s (%q): %s\n", verb, shortID(answered.ID), oneLineText(answered.Title), optionLabel(opt))
	return nil
}

// errNonePending: the session has no pending permission request.
var errNonePending = errors.New("no pending permission request")

// permissionWait bounds how long approve and deny wait for a request while
// the session's turn runs.
const permissionWait = 30 * time.Second

// awaitPermission waits, while the session's turn runs, for its agent's
// next permission request (up to permissionWait), so that
// `session prompt -detach ID …` followed by `session approve ID` answers the
// request the turn is about to make. A session with no turn running has
// none coming: none is the error pickPermission gave.
func awaitPermission(e *env, c *client.Client, sessionID string, none error) (api.Permission, error) {
	ctx, cancel := context.WithTimeout(e.ctx(), permissionWait)
	defer cancel()
	// The stream is opened before each look, so a request made between a
	// look and the wait still wakes it.
	stream, err := c.Events(ctx, client.EventFilter{SessionID: sessionID}, 0)
	if err != nil {
		return api.Permission{}, none
	}
	go func() { <-ctx.Done(); stream.Close() }()
	for {
		sess, err := c.GetSession(ctx, sessionID)
		if err != nil {
			return api.Permission{}, err
		}
		if sess.State != api.SessionRunning && sess.State != api.SessionStarting {
			return api.Permission{}, none
		}
		perms, err := c.Permissions(ctx, sessionID)
		if err != nil {
			return api.Permission{}, err
		}
		if p, err := pickPermission(perms, sessionID, ""); err == nil {
			return p, nil
		}
		if _, err := stream.Next(); err != nil {
			return api.Permission{}, fmt.Errorf("%w (its turn runs, and its agent asked nothing within %s)", none, permissionWait)
		}
	}
}

// pickPermission finds the pending request permID (an id or a unique
// prefix of one), or the oldest pending one when permID is empty.
func pickPermission(perms []api.Permission, sessionID, permID string) (api.Permission, error) {
	if permID == "" {
		for _, p := range perms {
			if p.State == api.PermissionPending {
				return p, nil
			}
		}
		return api.Permission{}, fmt.Errorf("session %s has %w", sessionID, errNonePending)
	}
	ids := make([]string, 0, len(perms))
	for _, p := range perms {
		if p.ID == permID {
			ids = []string{p.ID}
			break
		}
		ids = append(ids, p.ID)
	}
	full, err := matchPrefix("permission", permID, ids)
	if err != nil {
		return api.Permission{}, err
	}
	for _, p := range perms {
		if p.ID != full {
			continue
		}
		if p.State != api.PermissionPending {
			how := string(p.State)
			if p.OptionID != "" {
				how += " with " + p.OptionID
			}
			if p.AnsweredBy != "" {
				how += " by " + p.AnsweredBy
			}
			return api.Permission{}, fmt.Errorf("permission request %s of session %s is no longer pending: %s", shortID(p.ID), sessionID, how)
		}
		return p, nil
	}
	return api.Permission{}, fmt.Errorf("session %s has no permission request %q (\"paddock session permissions %s\" lists them)", sessionID, permID, sessionID)
}

// optionOfKind is the request's first option of the first of kinds it
// offers; the error lists what it offers instead.
func optionOfKind(p api.Permission, kinds ...string) (api.PermissionOption, error) {
	for _, k := range kinds {
		for _, o := range p.Options {
			if o.Kind == k {
				return o, nil
			}
		}
	}
	offered := make([]string, 0, len(p.Options))
	for _, o := range p.Options {
		offered = append(offered, optionLabel(o))
	}
	return api.PermissionOption{}, fmt.Errorf("permission request %s (%q) offers no %s option; it offers %s",
		shortID(p.ID), oneLineText(p.Title), strings.Join(kinds, " or "), orDefault(strings.Join(offered, ", "), "none"))
}

// permissionHint is the line `session prompt` prints when the agent asks
// for a permission mid-turn: what it asks and the commands that answer.
func permissionHint(p api.Permission, sessionID string) string {
	offered := make([]string, 0, len(p.Options))
	for _, o := range p.Options {
		offered = append(offered, optionLabel(o))
	}
	return fmt.Sprintf("[permission] the agent asks: %s (%s; offers %s) — answer with \"paddock session approve %s\" or \"paddock session deny %s\"",
		orDefault(oneLineText(p.Title), p.ToolCallID), cell(string(p.Kind)), orDefault(strings.Join(offered, ", "), "no options"), sessionID, sessionID)
}

// optionLabel is an option as people read it: "Allow once (allow_once)",
// its name and its kind.
func optionLabel(o api.PermissionOption) string {
	name := oneLineText(orDefault(o.Name, o.OptionID))
	if o.Kind == "" || o.Kind == name {
		return name
	}
	return fmt.Sprintf("%s (%s)", name, oneLineText(o.Kind))
}

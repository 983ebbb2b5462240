package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// The chat's side of the agent's work: permission requests asked inline
// and answered with a number or an option's name, and slash commands (the
// agent's, which are prompts, and the chat's own /help and /mode).

// eventPermission decodes the permission request of a permission event.
func eventPermission(ev api.Event) (api.Permission, bool) {
	raw, err := json.Marshal(ev.Data["permission"])
	if err != nil {
		return api.Permission{}, false
	}
	var p api.Permission
	if json.Unmarshal(raw, &p) != nil || p.ID == "" {
		return api.Permission{}, false
	}
	return p, true
}

// loadPermissions reads the session's requests: those pending join the
// questions, those that ended elsewhere leave them (events may have been
// missed across a reconnect).
func (ch *chat) loadPermissions(ctx context.Context) {
	perms, err := ch.c.Permissions(ctx, ch.id)
	if err != nil {
		if !client.IsCode(err, "not_found") {
			ch.notice("could not read the agent's permission requests: %s", noControls(err.Error(), ""))
		}
		return
	}
	for _, p := range perms {
		ch.permission(p)
	}
}

// permission takes a request's latest record: a pending one is asked (in
// turn, oldest first), an ended one stops being asked and, when it was
// answered elsewhere, cancelled or timed out, the chat says so.
func (ch *chat) permission(p api.Permission) {
	i := ch.pendingIndex(p.ID)
	if p.State == api.PermissionPending {
		if i < 0 && !ch.answered[p.ID] {
			ch.pending = append(ch.pending, p)
			sort.SliceStable(ch.pending, func(a, b int) bool { return ch.pending[a].CreatedAt.Before(ch.pending[b].CreatedAt) })
		}
		return
	}
	if i < 0 {
		return // answered here, or by the policy: the tool call's line tells
	}
	ch.pending = append(ch.pending[:i], ch.pending[i+1:]...)
	if ch.asked == p.ID {
		ch.asked = ""
		ch.marker = false
	}
	switch p.State {
	case api.PermissionAnswered:
		ch.notice("permission request %q was answered by %s: %s", oneLineText(p.Title), cell(p.AnsweredBy), optionName(p, p.OptionID))
	case api.PermissionTimedOut:
		ch.notice("permission request %q timed out: %s was chosen", oneLineText(p.Title), optionName(p, p.OptionID))
	case api.PermissionCancelled:
		ch.notice("permission request %q was cancelled", oneLineText(p.Title))
	default:
		ch.notice("permission request %q ended (%s)", oneLineText(p.Title), cell(string(p.State)))
	}
}

func (ch *chat) pendingIndex(id string) int {
	for i, p := range ch.pending {
		if p.ID == id {
			return i
		}
	}
	return -1
}

// optionName is the label of the request's option id ("" shows as "-").
func optionName(p api.Permission, id string) string {
	if o, ok := optionByID(p, id); ok {
		return optionLabel(o)
	}
	return cell(id)
}

// ask prints a pending request's question: its title and kind, then its
// options numbered ("1) Allow once  2) Reject").
func (ch *chat) ask(p api.Permission) {
	ch.asked = p.ID
	ch.closeLine()
	kind := ""
	if p.Kind != "" {
		kind = " (" + oneLineText(string(p.Kind)) + ")"
	}
	fmt.Fprintf(ch.out, "[permission] the agent asks: %s%s\n", orDefault(oneLineText(p.Title), p.ToolCallID), kind)
	opts := make([]string, 0, len(p.Options))
	for i, o := range p.Options {
		opts = append(opts, fmt.Sprintf("%d) %s", i+1, oneLineText(orDefault(o.Name, o.OptionID))))
	}
	fmt.Fprintf(ch.out, "  %s\n", strings.Join(opts, "  "))
	if !ch.tty {
		fmt.Fprintln(ch.out, "  (the next line answers: a number or an option's name)")
	}
}

// chooseOption is the option a typed answer names: its number (1-based),
// or its name, id or kind (case does not matter).
func chooseOption(p api.Permission, answer string) (api.PermissionOption, bool) {
	a := strings.TrimSpace(answer)
	if n, err := strconv.Atoi(a); err == nil {
		if n >= 1 && n <= len(p.Options) {
			return p.Options[n-1], true
		}
		return api.PermissionOption{}, false
	}
	for _, match := range []func(api.PermissionOption) string{
		func(o api.PermissionOption) string { return o.Name },
		func(o api.PermissionOption) string { return o.OptionID },
		func(o api.PermissionOption) string { return o.Kind },
	} {
		for _, o := range p.Options {
			if v := match(o); v != "" && strings.EqualFold(v, a) {
				return o, true
			}
		}
	}
	return api.PermissionOption{}, false
}

// answer answers the oldest pending request with the option a typed line
// names; a line that names none asks again.
func (ch *chat) answer(ctx context.Context, line string) {
	p := ch.pending[0]
	opt, ok := chooseOption(p, line)
	if !ok {
		ch.notice("the agent waits for an answer: type a number from 1 to %d or an option's name (ctrl-c cancels the turn)", len(p.Options))
		ch.asked = ""
		return
	}
	if _, err := ch.c.AnswerPermission(ctx, ch.id, p.ID, opt.OptionID); err != nil {
		ch.notice("the answer was not sent: %s", noControls(err.Error(), ""))
		if client.IsCode(err, "conflict") || client.IsCode(err, "not_found") {
			ch.loadPermissions(ctx) // it ended meanwhile: say how
		}
		ch.asked = ""
		return
	}
	ch.answered[p.ID] = true
	if i := ch.pendingIndex(p.ID); i >= 0 {
		ch.pending = append(ch.pending[:i], ch.pending[i+1:]...)
	}
	ch.asked = ""
	ch.notice("answered: %s", optionLabel(opt))
}

// slash handles a line that starts with "/": /help and /mode are the
// chat's own, "/NAME INPUT" of a command the agent announced is a prompt.
// It returns the text to send as a prompt, and false when there is none
// (the line was handled here, or refused).
func (ch *chat) slash(ctx context.Context, line string) (string, bool) {
	if !strings.HasPrefix(line, "/") {
		return line, true
	}
	word, arg, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	arg = strings.TrimSpace(arg)
	switch word {
	case "help":
		ch.help(ctx)
		return "", false
	case "mode":
		ch.mode(ctx, arg)
		return "", false
	}
	st, err := ch.c.SessionStatus(ctx, ch.id)
	if err != nil || len(st.Commands) == 0 {
		return line, true // no list to check it against: the agent decides
	}
	for _, c := range st.Commands {
		if c.Name == word {
			return line, true
		}
	}
	ch.notice("the agent has no command /%s; /help lists them (start the line with a space to send it as text)", oneLineText(word))
	return "", false
}

// help lists the agent's commands and the chat's own.
func (ch *chat) help(ctx context.Context) {
	st, err := ch.c.SessionStatus(ctx, ch.id)
	if err != nil {
		ch.notice("could not read the agent's commands: %s", noControls(err.Error(), ""))
		return
	}
	ch.closeLine()
	if len(st.Commands) == 0 {
		fmt.Fprintln(ch.out, "[paddock] the agent announced no commands")
	} else {
		fmt.Fprintln(ch.out, "[paddock] the agent's commands (/NAME INPUT sends them as a prompt):")
		tw := newTable(ch.out)
		for _, c := range st.Commands {
			name := "/" + oneLineText(c.Name)
			if c.InputHint != "" {
				name += " " + oneLineText(c.InputHint)
			}
			fmt.Fprintf(tw, "  %s\t%s\n", name, oneLineText(c.Description))
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(ch.out, "[paddock] the chat's own: /help (this list), /mode [NAME] (the agent's modes, or switch to NAME)")
}

// mode lists the agent's modes (no name) or switches to one, named by its
// id or its name.
func (ch *chat) mode(ctx context.Context, name string) {
	st, err := ch.c.SessionStatus(ctx, ch.id)
	if err != nil {
		ch.notice("could not read the agent's modes: %s", noControls(err.Error(), ""))
		return
	}
	if st.Modes == nil || len(st.Modes.Available) == 0 {
		ch.notice("the agent offers no modes")
		return
	}
	if name == "" {
		ch.closeLine()
		fmt.Fprintln(ch.out, "[paddock] the agent's modes (/mode NAME switches):")
		tw := newTable(ch.out)
		for _, m := range st.Modes.Available {
			mark := " "
			if m.ID == st.Modes.CurrentModeID {
				mark = "*"
			}
			fmt.Fprintf(tw, "  %s %s\t%s\t%s\n", mark, oneLineText(m.ID), oneLineText(m.Name), oneLineText(m.Description))
		}
		_ = tw.Flush()
		return
	}
	id := name
	for _, m := range st.Modes.Available {
		if strings.EqualFold(m.ID, name) || strings.EqualFold(m.Name, name) {
			id = m.ID
			break
		}
	}
	modes, err := ch.c.SetMode(ctx, ch.id, id)
	if err != nil {
		ch.notice("the mode was not changed: %s", noControls(err.Error(), ""))
		return
	}
	current := modes.CurrentModeID
	for _, m := range modes.Available {
		if m.ID == current && m.Name != "" {
			current = fmt.Sprintf("%s (%s)", oneLineText(m.Name), oneLineText(m.ID))
		}
	}
	ch.notice("mode: %s", current)
}

package acpagent

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/paddockhq/paddock/api"
)

// The agent's work besides its prose: tool calls, plans, commands and
// modes. They are decoded here leniently, field by field, and not by the
// SDK's types: the SDK drops a whole notification when one field does not
// match the schema (an unknown kind, a content item of a new type), and a
// tool call an agent reports slightly wrong is still worth showing.

// ToolCallUpdate is one tool_call (Create) or tool_call_update as far as it
// parsed: a nil or unset field was absent (or unusable) and keeps its value
// when merged.
type ToolCallUpdate struct {
	// Create: a tool_call (the call's first report), not an update.
	Create bool
	// ID is the toolCallId ("" when the agent sent none).
	ID     string
	Title  *string
	Kind   *api.ToolKind
	Status *api.ToolCallStatus
	// Locations and Content replace the call's when set (HasLocations,
	// HasContent), even with an empty list.
	Locations    []api.ToolLocation
	HasLocations bool
	Content      []api.ToolContent
	HasContent   bool
	RawInput     json.RawMessage
	RawOutput    json.RawMessage
}

// Apply merges u into tc: what u carries replaces, what it leaves out keeps.
func (u ToolCallUpdate) Apply(tc *api.ToolCall) {
	if u.ID != "" {
		tc.ID = u.ID
	}
	if u.Title != nil {
		tc.Title = *u.Title
	}
	if u.Kind != nil {
		tc.Kind = *u.Kind
	}
	if u.Status != nil {
		tc.Status = *u.Status
	}
	if u.HasLocations {
		tc.Locations = u.Locations
	}
	if u.HasContent {
		tc.Content = u.Content
	}
	if u.RawInput != nil {
		tc.RawInput = u.RawInput
	}
	if u.RawOutput != nil {
		tc.RawOutput = u.RawOutput
	}
	// A call is always shown with a kind, a status and lists, never nulls.
	if tc.Kind == "" {
		tc.Kind = api.ToolOther
	}
	if tc.Status == "" {
		tc.Status = api.ToolPending
	}
	if tc.Locations == nil {
		tc.Locations = []api.ToolLocation{}
	}
	if tc.Content == nil {
		tc.Content = []api.ToolContent{}
	}
}

// NormalizeKind maps an agent's tool kind to api's ("other" when unknown).
func NormalizeKind(k string) api.ToolKind {
	for _, known := range api.ToolKinds {
		if string(known) == k {
			return known
		}
	}
	return api.ToolOther
}

// fields decodes a JSON object into its fields (nil when raw is not one).
func fields(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// str decodes a string field; ok is false when absent or not a string
// (null included: ACP's optional fields may come as null, which says
// nothing, as absent does).
func str(m map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether a field's JSON is null.
func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// idField reads an identifier that should be a string but may come as a
// number.
func idField(m map[string]json.RawMessage, key string) string {
	if s, ok := str(m, key); ok {
		return s
	}
	var n json.Number
	if raw, ok := m[key]; ok && json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// rawValue keeps a field's JSON as it came (nil when absent or null).
func rawValue(m map[string]json.RawMessage, key string) json.RawMessage {
	raw, ok := m[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}

// parseToolCall decodes the update object of a tool_call or
// tool_call_update (or a permission request's toolCall).
func parseToolCall(raw json.RawMessage, create bool) ToolCallUpdate {
	m := fields(raw)
	u := ToolCallUpdate{Create: create}
	if m == nil {
		return u
	}
	u.ID = idField(m, "toolCallId")
	if s, ok := str(m, "title"); ok {
		u.Title = &s
	}
	if s, ok := str(m, "kind"); ok {
		k := NormalizeKind(s)
		u.Kind = &k
	} else if _, present := m["kind"]; present && string(m["kind"]) != "null" {
		k := api.ToolOther // a kind that is not even a string
		u.Kind = &k
	}
	if s, ok := str(m, "status"); ok {
		switch st := api.ToolCallStatus(s); st {
		case api.ToolPending, api.ToolInProgress, api.ToolCompleted, api.ToolFailed:
			u.Status = &st
		}
	}
	if raw, ok := m["locations"]; ok && !isNull(raw) {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			u.HasLocations = true
			u.Locations = []api.ToolLocation{}
			for _, it := range items {
				if loc, ok := parseLocation(it); ok {
					u.Locations = append(u.Locations, loc)
				}
			}
		}
	}
	if raw, ok := m["content"]; ok && !isNull(raw) {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			u.HasContent = true
			u.Content = []api.ToolContent{}
			for _, it := range items {
				if c, ok := parseToolContent(it); ok {
					u.Content = append(u.Content, c)
				}
			}
		}
	}
	u.RawInput = rawValue(m, "rawInput")
	u.RawOutput = rawValue(m, "rawOutput")
	if create {
		// A tool_call is the whole call: what it leaves out has its default.
		if u.Title == nil {
			u.Title = new(string)
		}
		if u.Kind == nil {
			k := api.ToolOther
			u.Kind = &k
		}
		if u.Status == nil {
			st := api.ToolPending
			u.Status = &st
		}
	}
	return u
}

func parseLocation(raw json.RawMessage) (api.ToolLocation, bool) {
	m := fields(raw)
	p, ok := str(m, "path")
	if !ok || p == "" {
		return api.ToolLocation{}, false
	}
	loc := api.ToolLocation{Path: p}
	var line int
	if raw, ok := m["line"]; ok && json.Unmarshal(raw, &line) == nil {
		loc.Line = &line
	}
	return loc, true
}

// parseToolContent decodes one content item; items of unknown types, and
// content blocks other than text, are left out.
func parseToolContent(raw json.RawMessage) (api.ToolContent, bool) {
	m := fields(raw)
	typ, _ := str(m, "type")
	switch typ {
	case "content":
		inner := fields(m["content"])
		if t, _ := str(inner, "type"); t != "text" {
			return api.ToolContent{}, false
		}
		text, ok := str(inner, "text")
		return api.ToolContent{Type: api.ContentText, Text: text}, ok
	case "diff":
		p, ok := str(m, "path")
		if !ok {
			return api.ToolContent{}, false
		}
		c := api.ToolContent{Type: api.ContentDiff, Path: p}
		c.NewText, _ = str(m, "newText")
		if old, ok := str(m, "oldText"); ok {
			c.OldText = &old
		}
		return c, true
	case "terminal":
		id := idField(m, "terminalId")
		return api.ToolContent{Type: api.ContentTerminal, Terminal: id}, id != ""
	}
	return api.ToolContent{}, false
}

// parsePlan decodes a plan update's entries (entries that are not objects
// are left out; missing fields are empty).
func parsePlan(raw json.RawMessage) api.Plan {
	p := api.Plan{Entries: []api.PlanEntry{}}
	var items []json.RawMessage
	if json.Unmarshal(fields(raw)["entries"], &items) != nil {
		return p
	}
	for _, it := range items {
		m := fields(it)
		if m == nil {
			continue
		}
		var e api.PlanEntry
		e.Content, _ = str(m, "content")
		e.Priority, _ = str(m, "priority")
		e.Status, _ = str(m, "status")
		p.Entries = append(p.Entries, e)
	}
	return p
}

// parseCommands decodes available_commands_update's commands (nameless ones
// are left out).
func parseCommands(raw json.RawMessage) []api.AgentCommand {
	out := []api.AgentCommand{}
	var items []json.RawMessage
	if json.Unmarshal(fields(raw)["availableCommands"], &items) != nil {
		return out
	}
	for _, it := range items {
		m := fields(it)
		name, _ := str(m, "name")
		if name = strings.TrimPrefix(strings.TrimSpace(name), "/"); name == "" {
			continue
		}
		c := api.AgentCommand{Name: name}
		c.Description, _ = str(m, "description")
		c.InputHint, _ = str(fields(m["input"]), "hint")
		out = append(out, c)
	}
	return out
}

package acpagent

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// TestNullFieldsSayNothing: ACP's optional fields may come as null (the
// TypeScript SDK's agents send a new file's diff with "oldText": null). A
// null says nothing, as an absent field does: a diff with a null oldText
// is a new file's (no old_text), not a diff from an empty file, and an
// update's null title, kind, status, content or locations keep the call's.
func TestNullFieldsSayNothing(t *testing.T) {
	c, ok := parseToolContent(json.RawMessage(`{"type":"diff","path":"/w/a.txt","oldText":null,"newText":"x\n"}`))
	if !ok || c.Type != api.ContentDiff || c.Path != "/w/a.txt" || c.NewText != "x\n" || c.OldText != nil {
		t.Fatalf("diff with oldText null: %+v %v, want no old text (a new file)", c, ok)
	}
	c, ok = parseToolContent(json.RawMessage(`{"type":"diff","path":"/w/a.txt","oldText":"","newText":"x\n"}`))
	if !ok || c.OldText == nil || *c.OldText != "" {
		t.Fatalf("diff from an empty file: %+v %v, want old text \"\"", c, ok)
	}

	title, kind, status := "Edit a.txt", api.ToolEdit, api.ToolInProgress
	tc := api.ToolCall{ID: "t1", Title: title, Kind: kind, Status: status,
		Locations: []api.ToolLocation{{Path: "/w/a.txt"}}, Content: []api.ToolContent{{Type: api.ContentText, Text: "working"}}}
	u := parseToolCall(json.RawMessage(`{"toolCallId":"t1","title":null,"kind":null,"status":null,"content":null,"locations":null}`), false)
	if u.Title != nil || u.Kind != nil || u.Status != nil || u.HasContent || u.HasLocations {
		t.Fatalf("update of nulls: %+v, want nothing set", u)
	}
	u.Apply(&tc)
	if tc.Title != title || tc.Kind != kind || tc.Status != status || len(tc.Locations) != 1 || len(tc.Content) != 1 {
		t.Fatalf("after an update of nulls: %+v, want the call unchanged", tc)
	}

	// A tool_call of nulls gets the defaults of what it leaves out.
	u = parseToolCall(json.RawMessage(`{"toolCallId":"t2","title":null,"kind":null,"status":null}`), true)
	if u.Title == nil || *u.Title != "" || u.Kind == nil || *u.Kind != api.ToolOther || u.Status == nil || *u.Status != api.ToolPending {
		t.Fatalf("tool_call of nulls: %+v", u)
	}
}

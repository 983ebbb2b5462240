package api_test

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// tsWireTypes maps the web UI's TypeScript interfaces (ui/src/api.ts) to the
// Go wire types they mirror. Every interface there is either here or in
// tsNotWire, so a new one is a decision, not an accident.
var tsWireTypes = map[string]any{
	"Task":             api.Task{},
	"Session":          api.Session{},
	"Status":           api.Status{},
	"Controller":       api.Controller{},
	"Message":          api.Message{},
	"ToolLocation":     api.ToolLocation{},
	"ToolContent":      api.ToolContent{},
	"ToolCall":         api.ToolCall{},
	"PlanEntry":        api.PlanEntry{},
	"Plan":             api.Plan{},
	"PermissionOption": api.PermissionOption{},
	"Permission":       api.Permission{},
	"AgentCommand":     api.AgentCommand{},
	"AgentMode":        api.AgentMode{},
	"AgentModes":       api.AgentModes{},
	"Event":            api.Event{},
	"TerminalInfo":     api.Terminal{},
	"Agent":            api.Agent{},
	"FileEntry":        api.FileEntry{},
}

// tsNotWire are interfaces of ui/src/api.ts with no Go type in package api
// (yet): the reason for each.
var tsNotWire = map[string]string{
	"GitStatus": "git status: declared by agentctl's workspace package",
}

var tsInterface = regexp.MustCompile(`(?m)^export interface (\w+)\s*\{`)

// tsFields parses the top-level field names of each exported interface.
func tsFields(t *testing.T, src string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range tsInterface.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		depth, start := 1, m[1]
		end := start
		for end < len(src) && depth > 0 {
			switch src[end] {
			case '{':
				depth++
			case '}':
				depth--
			}
			end++
		}
		body := src[start : end-1]
		// Split the body at ';' and newlines outside nested braces.
		var fields []string
		depth, from := 0, 0
		for i := 0; i <= len(body); i++ {
			if i < len(body) {
				switch body[i] {
				case '{', '(', '<', '[':
					depth++
					continue
				case '}', ')', '>', ']':
					depth--
					continue
				case ';', '\n':
					if depth > 0 {
						continue
					}
				default:
					continue
				}
			}
			part := strings.TrimSpace(body[from:i])
			from = i + 1
			if part == "" || strings.HasPrefix(part, "//") {
				continue
			}
			if colon := strings.IndexByte(part, ':'); colon > 0 {
				fields = append(fields, strings.TrimSuffix(strings.TrimSpace(part[:colon]), "?"))
			}
		}
		out[name] = fields
	}
	return out
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out[tag] = true
	}
	return out
}

// TestTheWebUIsTypesMatchTheWireTypes: every field the web UI's TypeScript
// declares for a wire object exists under that JSON name in the Go type,
// so renaming a field on either side fails here (as docs/CLI.md is checked
// against the command table).
func TestTheWebUIsTypesMatchTheWireTypes(t *testing.T) {
	src, err := os.ReadFile("../ui/src/api.ts")
	if err != nil {
		t.Fatal(err)
	}
	ifaces := tsFields(t, string(src))
	if len(ifaces) < len(tsWireTypes) {
		t.Fatalf("parsed %d interfaces of ui/src/api.ts, want at least %d: the parser no longer reads it", len(ifaces), len(tsWireTypes))
	}
	names := make([]string, 0, len(ifaces))
	for n := range ifaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		goType, ok := tsWireTypes[name]
		if !ok {
			if _, skip := tsNotWire[name]; !skip {
				t.Errorf("ui/src/api.ts declares interface %s, which is neither mapped to a Go wire type nor listed as not one", name)
			}
			continue
		}
		have := jsonFields(goType)
		for _, f := range ifaces[name] {
			if !have[f] {
				t.Errorf("ui/src/api.ts %s.%s: %T has no JSON field %q", name, f, goType, f)
			}
		}
	}
	for name := range tsWireTypes {
		if _, ok := ifaces[name]; !ok {
			t.Errorf("ui/src/api.ts no longer declares %s", name)
		}
	}
}

package chaos

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
)

func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ex := func(pid int, tok uint64, start, end int) Execution {
		e := Execution{SessionID: "s", PID: pid, Token: tok, Start: at(start)}
		if end >= 0 {
			e.End = at(end)
		} else {
			e.Alive = true
		}
		return e
	}
	// watched is an execution whose end the watcher saw: alive at
	// lastSeen, gone at end.
	watched := func(pid int, tok uint64, start, lastSeen, end int) Execution {
		e := ex(pid, tok, start, end)
		e.LastSeen = at(lastSeen)
		return e
	}
	held := func(idx, tok uint64, holder string) Grant {
		return Grant{SessionID: "s", Index: idx, Token: tok, State: "held", Holder: holder, Nonce: "n-" + holder}
	}
	for _, tc := range []struct {
		name   string
		execs  []Execution
		grants []Grant
		want   string // "" = no violation
	}{
		{"sequential", []Execution{ex(1, 5, 0, 100), ex(2, 9, 150, -1)}, []Grant{held(5, 5, "a"), held(9, 9, "b")}, ""},
		{"overlap", []Execution{ex(1, 5, 0, 200), ex(2, 9, 150, -1)}, nil, "overlap"},
		{"two alive", []Execution{ex(1, 5, 0, -1), ex(2, 9, 150, -1)}, nil, "overlap"},
		{"touching is not overlap", []Execution{ex(1, 5, 0, 150), ex(2, 9, 150, 300)}, nil, ""},
		{"start within its rounding of the end", []Execution{ex(1, 5, 0, 160), ex(2, 9, 150, 300)}, nil, ""},
		{"a watched end seen alive after the next start", []Execution{watched(1, 5, 0, 190, 230), ex(2, 9, 150, -1)}, nil, "overlap"},
		{"a watched end within the watcher's lag", []Execution{watched(1, 5, 0, 140, 190), ex(2, 9, 150, -1)}, nil, ""},
		{"token backwards", []Execution{ex(1, 9, 0, 100), ex(2, 5, 150, 300)}, nil, "execution token went backwards"},
		{"grant backwards", nil, []Grant{held(9, 9, "a"), held(12, 5, "b")}, "grant token went backwards"},
		{"new holder same token", nil, []Grant{held(9, 9, "a"), held(12, 9, "b")}, "without a new token"},
		{"launch nonce replaced", nil, []Grant{{SessionID: "s", Index: 9, Token: 9, State: "held", Holder: "a", Nonce: "launch-1234"}, held(10, 9, "a")}, ""},
		{"never granted", []Execution{ex(1, 7, 0, 100)}, []Grant{held(5, 5, "a")}, "never granted"},
		{"other sessions apart", []Execution{ex(1, 5, 0, 200), {SessionID: "t", PID: 2, Token: 9, Start: at(100), End: at(300)}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := Check(tc.execs, tc.grants, at(1000))
			if tc.want == "" {
				if len(vs) > 0 {
					t.Fatalf("violations %v", vs)
				}
				return
			}
			if len(vs) == 0 || !strings.Contains(vs[0].What, tc.want) {
				t.Fatalf("violations %v; want %q", vs, tc.want)
			}
		})
	}
}

func TestCheckPrompts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	answered := func(word string, sent int) Prompt {
		return Prompt{SessionID: "s", Word: word, Sent: at(sent), Seen: at(sent + 100), Answered: true}
	}
	unanswered := func(word string, sent, seen int) Prompt {
		return Prompt{SessionID: "s", Word: word, Sent: at(sent), Seen: at(seen)}
	}
	ended := func(end int) Execution {
		return Execution{SessionID: "s", PID: 1, Token: 1, Start: at(-10000), End: at(end)}
	}
	sent := map[string][]string{"s": {"a", "b", "c", "d"}}
	for _, tc := range []struct {
		name    string
		prompts []Prompt
		execs   []Execution
		recalls map[string][]string
		want    string // "" = no violation
	}{
		{"all answered and recalled", []Prompt{answered("a", 0), answered("b", 500)}, nil, map[string][]string{"s": {"a", "b"}}, ""},
		{"recall may list unconfirmed words", []Prompt{answered("a", 0), answered("c", 900)}, nil, map[string][]string{"s": {"a", "b", "c"}}, ""},
		{"nothing to recall and nothing confirmed", nil, nil, map[string][]string{"s": {}}, ""},
		{"lost session", []Prompt{answered("a", 0)}, nil, map[string][]string{}, "lost session"},
		{"confirmed word forgotten", []Prompt{answered("a", 0), answered("b", 500)}, nil, map[string][]string{"s": {"a"}}, "lost \"b\""},
		{"out of order", []Prompt{answered("a", 0), answered("b", 500)}, nil, map[string][]string{"s": {"b", "a"}}, "out of order"},
		{"foreign word", nil, nil, map[string][]string{"s": {"zz"}}, "never sent"},
		{"cut by an execution end", []Prompt{unanswered("a", 1000, 3000)}, []Execution{ended(1500)}, map[string][]string{"s": {}}, ""},
		{"end just before the send", []Prompt{unanswered("a", 1000, 3000)}, []Execution{ended(400)}, map[string][]string{"s": {}}, ""},
		{"unanswered, no end", []Prompt{unanswered("a", 1000, 3000)}, nil, map[string][]string{"s": {}}, "never answered"},
		{"unanswered, end long before", []Prompt{unanswered("a", 5000, 7000)}, []Execution{ended(1000)}, map[string][]string{"s": {}}, "never answered"},
		{"unanswered, end of another session", []Prompt{unanswered("a", 1000, 3000)}, []Execution{{SessionID: "t", PID: 2, Start: at(0), End: at(1500)}}, map[string][]string{"s": {}}, "never answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := CheckPrompts([]string{"s"}, tc.prompts, tc.execs, sent, tc.recalls)
			if tc.want == "" {
				if len(vs) > 0 {
					t.Fatalf("violations %v", vs)
				}
				return
			}
			if len(vs) == 0 || !strings.Contains(vs[0].What, tc.want) {
				t.Fatalf("violations %v; want %q", vs, tc.want)
			}
		})
	}
}

func TestRecallAnswer(t *testing.T) {
	msg := func(id, text string, complete bool) api.Message {
		return api.Message{ID: id, Role: api.RoleAgent, Text: text, Complete: complete}
	}
	old := map[string]bool{"m2\x00you asked me to remember: a": true}
	for _, tc := range []struct {
		name string
		msgs []api.Message
		want []string
		ok   bool
	}{
		{"new reply", []api.Message{msg("m2", "you asked me to remember: a", true), msg("m4", "you asked me to remember: a, b", true)}, []string{"a", "b"}, true},
		{"nothing", []api.Message{msg("m4", "nothing to recall", true)}, []string{}, true},
		{"only the old one", []api.Message{msg("m2", "you asked me to remember: a", true)}, nil, false},
		{"incomplete", []api.Message{msg("m4", "you asked me to remember: a, b", false)}, nil, false},
		{"other reply", []api.Message{msg("m4", "ok, remembering b", true)}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := recallAnswer(tc.msgs, old)
			if ok != tc.ok || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v %v; want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestHold(t *testing.T) {
	r := &runner{o: Options{TTL: 2 * time.Second}}
	rng := rand.New(rand.NewPCG(1, 2))
	short, long := 0, 0
	for range 1000 {
		d := r.hold(rng)
		switch {
		case d >= 600*time.Millisecond && d < 1700*time.Millisecond:
			short++
		case d >= 2200*time.Millisecond && d < 3200*time.Millisecond:
			long++
		default:
			t.Fatalf("hold %s is in neither band", d)
		}
	}
	if short < 400 || long < 400 {
		t.Fatalf("%d short and %d long holds of 1000", short, long)
	}
}

// FuzzRecallAnswer: any agent text is parsed without panicking, and a
// recall reply's words joined back give its text.
func FuzzRecallAnswer(f *testing.F) {
	for _, s := range []string{"you asked me to remember: a, b", "nothing to recall", "you asked me to remember: ", "ok, remembering x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		words, ok := recallAnswer([]api.Message{{ID: "m1", Role: api.RoleAgent, Text: text, Complete: true}}, nil)
		if !ok {
			return
		}
		if text == recallNothing {
			if len(words) != 0 {
				t.Fatalf("%q gave %v", text, words)
			}
			return
		}
		if got := recallReply + strings.Join(words, ", "); got != text {
			t.Fatalf("%q parsed into %v, which joins back to %q", text, words, got)
		}
	})
}

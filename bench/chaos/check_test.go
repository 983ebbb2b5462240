package chaos

import (
	"strings"
	"testing"
	"time"
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

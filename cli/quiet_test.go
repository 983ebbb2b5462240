package cli

import (
	"strings"
	"testing"
)

// TestQuietAndShortIDs: -q prints only ids (task create and list, session
// create and list), so ID=$(paddock … -q) works; session create -q still
// waits and fails with exit 1; tables show 8-character ids, more where 8
// would not tell two apart, and -verbose shows them whole.
func TestQuietAndShortIDs(t *testing.T) {
	const (
		s1 = "aaaaaaaa-1111-4000-8000-000000000001"
		s2 = "aaaaaaaa-2222-4000-8000-000000000002"
		t1 = "bbbbbbbb-1111-4000-8000-000000000001"
	)
	sess := func(id, state string) string {
		return `{"id":"` + id + `","task_id":"` + t1 + `","state":"` + state + `","agent":"demo","runtime":"standalone"}`
	}
	f, addr := startFake(t)
	f.routes["GET /v1/sessions"] = route{200, `{"sessions":[` + sess(s1, "RUNNING") + `,` + sess(s2, "STOPPED") + `]}`}
	f.routes["GET /v1/tasks"] = route{200, `{"tasks":[{"id":"` + t1 + `","title":"fix bug","state":"OPEN"}]}`}
	f.routes["POST /v1/tasks"] = route{201, `{"id":"` + t1 + `","title":"fix bug","state":"OPEN"}`}
	f.routes["POST /v1/tasks/t1/sessions"] = route{201, sess(s1, "STARTING")}
	f.routes["GET /v1/sessions/"+s1] = route{200, sess(s1, "WAITING_FOR_INPUT")}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"task", "create", "-q", "-title", "fix bug"}, t1 + "\n"},
		{[]string{"task", "list", "-q"}, t1 + "\n"},
		{[]string{"session", "list", "-q"}, s1 + "\n" + s2 + "\n"},
		{[]string{"session", "create", "-q", "-task", "t1", "-agent", "demo", "-runtime", "standalone"}, s1 + "\n"},
		{[]string{"session", "create", "-q", "-detach", "-task", "t1", "-agent", "demo", "-runtime", "standalone"}, s1 + "\n"},
	} {
		code, out, errOut := runCLI(addr, tc.args...)
		if code != 0 || errOut != "" || out != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want stdout %q", tc.args, code, out, errOut, tc.want)
		}
	}

	// The table: task ids cut to 8, session ids (alike in 8) to 12.
	code, out, _ := runCLI(addr, "session", "list")
	if code != 0 || !strings.Contains(out, "aaaaaaaa-111 ") || !strings.Contains(out, "aaaaaaaa-222 ") || !strings.Contains(out, "bbbbbbbb ") || strings.Contains(out, s1) {
		t.Errorf("session list:\n%s", out)
	}
	if code, out, _ = runCLI(addr, "session", "list", "-verbose"); code != 0 || !strings.Contains(out, s1) || !strings.Contains(out, t1) {
		t.Errorf("session list -verbose:\n%s", out)
	}
	if code, out, _ = runCLI(addr, "task", "list"); code != 0 || !strings.Contains(out, "bbbbbbbb ") || strings.Contains(out, t1) {
		t.Errorf("task list:\n%s", out)
	}

	// A session that fails while create -q waits: exit 1, no id on stdout.
	f.routes["GET /v1/sessions/"+s1] = route{200, `{"id":"` + s1 + `","task_id":"t1","state":"ERROR","error_message":"start agent: no such file"}`}
	code, out, errOut := runCLI(addr, "session", "create", "-q", "-task", "t1", "-agent", "demo", "-runtime", "standalone")
	if code != 1 || out != "" || !strings.Contains(errOut, "no such file") {
		t.Errorf("a failed create -q: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestSessionRenameAndPin: rename and pin call their routes and say what
// they did; -unpin unpins.
func TestSessionRenameAndPin(t *testing.T) {
	f, addr := startFake(t)
	f.routes["POST /v1/sessions/s1/rename"] = route{200, `{"id":"s1","task_id":"t1","state":"RUNNING","name":"fix the login"}`}
	f.routes["POST /v1/sessions/s1/pin"] = route{200, `{"id":"s1","task_id":"t1","state":"RUNNING","pinned":true}`}
	code, out, errOut := runCLI(addr, "session", "rename", "s1", "fix", "the", "login")
	if code != 0 || out != "Session s1 is named \"fix the login\"\n" {
		t.Fatalf("rename: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runCLI(addr, "session", "pin", "s1"); code != 0 || !strings.Contains(out, "Pinned session s1") {
		t.Fatalf("pin: exit %d, %q", code, out)
	}
	f.routes["POST /v1/sessions/s1/pin"] = route{200, `{"id":"s1","task_id":"t1","state":"RUNNING","pinned":false}`}
	if code, out, _ := runCLI(addr, "session", "pin", "s1", "-unpin"); code != 0 || !strings.Contains(out, "Unpinned session s1") {
		t.Fatalf("unpin: exit %d, %q", code, out)
	}
	var bodies []string
	for _, r := range posts(f) {
		bodies = append(bodies, r.path+" "+r.body)
	}
	want := []string{`/v1/sessions/s1/rename {"name":"fix the login"}`, `/v1/sessions/s1/pin {"pinned":true}`, `/v1/sessions/s1/pin {"pinned":false}`}
	if len(bodies) != 3 {
		t.Fatalf("posts %q", bodies)
	}
	for i, b := range bodies {
		p, body, _ := strings.Cut(b, " ")
		wp, wbody, _ := strings.Cut(want[i], " ")
		if p != wp || !jsonEqual(body, wbody) {
			t.Errorf("post %d: %q, want %q", i, b, want[i])
		}
	}
}

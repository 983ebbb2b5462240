package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// sessionIn is session s1 in the given state (and error message).
func sessionIn(state, errMsg string) string {
	return `{"id":"s1","task_id":"t1","state":"` + state + `","agent":"demo","runtime":"standalone","executor_id":"e1","has_resume_token":true,"error_message":"` + errMsg + `"}`
}

// TestLifecycleCommandsWait: create, resume, stop and delete wait for the
// session's state and say where it ended; a failure there is an error with
// the session's error_message, a wait that runs out says the server carries
// on, and neither tells the user to do again what just failed.
func TestLifecycleCommandsWait(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		now     string // GET /v1/sessions/s1 while waiting
		wantOut []string
		wantErr string // "" for success
	}{
		{"create waits for the agent", []string{"session", "create", "-task", "t1", "-agent", "demo", "-runtime", "standalone"},
			sessionIn("WAITING_FOR_INPUT", ""), []string{"Created session s1", "Session s1 is WAITING_FOR_INPUT"}, ""},
		{"create whose agent fails", []string{"session", "create", "-task", "t1", "-agent", "demo", "-runtime", "standalone"},
			sessionIn("ERROR", "start agent: no such file"), []string{"Created session s1"}, "session s1 failed to start: start agent: no such file"},
		{"create that outlives the wait", []string{"session", "create", "-task", "t1", "-agent", "demo", "-runtime", "standalone", "-timeout", "300ms"},
			sessionIn("STARTING", ""), []string{"Created session s1"}, "session s1 is still STARTING after 300ms"},
		{"resume waits for the agent", []string{"session", "resume", "s1"},
			sessionIn("WAITING_FOR_INPUT", ""), []string{"Resuming session s1", "Session s1 is WAITING_FOR_INPUT"}, ""},
		{"resume whose agent fails", []string{"session", "resume", "s1"},
			sessionIn("ERROR", "resume agent demo with its token: gone"), []string{"Resuming session s1"}, "session s1 failed to resume: resume agent demo with its token: gone"},
		{"stop waits for STOPPED", []string{"session", "stop", "s1"},
			sessionIn("STOPPED", ""), []string{"Stopping session s1", "Session s1 is STOPPED"}, ""},
		{"stop whose drain fails", []string{"session", "stop", "s1"},
			sessionIn("ERROR", "stop: stop executor e1: timeout"), nil, "stopping session s1 failed: stop: stop executor e1: timeout"},
		{"delete", []string{"session", "delete", "s1"},
			sessionIn("COMPLETED", ""), []string{"Deleted session s1 (state COMPLETED)"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFake(t)
			f.routes["GET /v1/sessions/s1"] = route{200, tc.now}
			code, out, errOut := runCLI(addr, tc.args...)
			assertInOrder(t, out, tc.wantOut)
			if tc.wantErr == "" {
				if code != 0 || errOut != "" {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				return
			}
			if code != 1 || !strings.Contains(errOut, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, tc.wantErr)
			}
			if strings.Contains(strings.ToLower(errOut), "resume the session") {
				t.Errorf("the error asks for a resume: %q", errOut)
			}
		})
	}
}

// TestWaitJSONIsTheSessionAtTheEnd: with -json a command that waits prints
// the server's JSON of the session as it ended.
func TestWaitJSONIsTheSessionAtTheEnd(t *testing.T) {
	f, addr := startFake(t)
	body := sessionIn("STOPPED", "")
	f.routes["GET /v1/sessions/s1"] = route{200, body}
	code, out, errOut := runCLI(addr, "session", "stop", "s1", "-json")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !jsonEqual(out, body) {
		t.Errorf("stdout %s, want %s", out, body)
	}
}

// TestRefusedResumeNeverAsksForAResume: a resume refused for a resumable
// session reports the server's reason, not the status sentence that says
// to resume; a session that cannot resume gets the sentence saying why.
func TestRefusedResumeNeverAsksForAResume(t *testing.T) {
	f, addr := startFake(t)
	f.routes["POST /v1/sessions/s3/resume"] = route{409, `{"error":{"code":"conflict","message":"session s3 is WAITING_FOR_INPUT: its agent is running already"}}`}
	f.routes["GET /v1/sessions/s3/status"] = route{200, `{"session_id":"s3","state":"ERROR","is_agent_running":false,"is_resumable":true,"needs_resume":true,"resume_reason":"agent_not_running","resume_message":"The agent is not running. Resume the session to continue the conversation."}`}
	code, _, errOut := runCLI(addr, "session", "resume", "s3")
	if code != 1 || !strings.Contains(errOut, "its agent is running already") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, "Resume the session") {
		t.Errorf("a failed resume asks for a resume: %q", errOut)
	}
	code, _, errOut = runCLI(addr, "session", "resume", "s2")
	if code != 1 || !strings.Contains(errOut, "This agent cannot resume previous sessions. Create a new session.") {
		t.Fatalf("not resumable: exit %d, stderr %q", code, errOut)
	}
}

// TestPromptPrintsTheReply: without an event stream, prompt waits for the
// turn to end and prints the agent's reply (the messages after the last
// user message).
func TestPromptPrintsTheReply(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/sessions/s1"] = route{200, sessionIn("WAITING_FOR_INPUT", "")}
	f.routes["GET /v1/sessions/s1/messages"] = route{200, `{"messages":[{"id":"m1","role":"user","text":"remember red","complete":true},{"id":"m2","role":"agent","text":"ok, remembering red","complete":true},{"id":"m3","role":"user","text":"recall","complete":true},{"id":"m4","role":"agent","text":"you asked me to remember: red","complete":true}]}`}
	code, out, errOut := runCLI(addr, "session", "prompt", "s1", "recall")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if out != "you asked me to remember: red\n" {
		t.Errorf("stdout %q, want only the reply", out)
	}
	reqs := f.requests()
	var prompted bool
	for _, r := range reqs {
		prompted = prompted || (r.method == "POST" && r.path == "/v1/sessions/s1/prompt" && jsonEqual(r.body, `{"text":"recall"}`))
	}
	if !prompted {
		t.Errorf("no prompt request among %v", reqs)
	}
}

// TestPromptTextFromFile: -file sends the file as the prompt, and text
// besides it is refused.
func TestPromptTextFromFile(t *testing.T) {
	f, addr := startFake(t)
	path := t.TempDir() + "/p.txt"
	if err := writeFile(path, "remember\nmany lines"); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(addr, "session", "prompt", "s1", "-file", path, "-detach")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	last := f.requests()[len(f.requests())-1]
	if !jsonEqual(last.body, `{"text":"remember\nmany lines"}`) {
		t.Errorf("body %s", last.body)
	}
	if code, _, errOut := runCLI(addr, "session", "prompt", "s1", "-file", path, "more"); code != 1 || !strings.Contains(errOut, "not both") {
		t.Errorf("text and -file: exit %d, stderr %q", code, errOut)
	}
}

// TestTaskCloseReopenDeleteCommands: each calls its route and says what it did.
func TestTaskCloseReopenDeleteCommands(t *testing.T) {
	f, addr := startFake(t)
	f.routes["POST /v1/tasks/t1/close"] = route{200, `{"id":"t1","title":"fix bug","state":"DONE"}`}
	f.routes["POST /v1/tasks/t1/reopen"] = route{200, `{"id":"t1","title":"fix bug","state":"REVIEW"}`}
	f.routes["DELETE /v1/tasks/t1"] = route{200, `{"id":"t1","title":"fix bug","state":"REVIEW"}`}
	f.routes["GET /v1/sessions"] = route{200, `{"sessions":[` + sessionIn("WAITING_FOR_INPUT", "") + `]}`}
	for _, tc := range []struct {
		args    []string
		wantOut []string
		wantReq string
	}{
		{[]string{"task", "close", "t1"}, []string{"Closed task t1 (DONE)", "1 of its sessions still run"}, "POST /v1/tasks/t1/close"},
		{[]string{"task", "reopen", "t1"}, []string{"Reopened task t1 (REVIEW)"}, "POST /v1/tasks/t1/reopen"},
		{[]string{"task", "delete", "t1"}, []string{"Deleted task t1 and its sessions"}, "DELETE /v1/tasks/t1"},
	} {
		code, out, errOut := runCLI(addr, tc.args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, errOut)
		}
		assertInOrder(t, out, tc.wantOut)
		var seen bool
		for _, r := range f.requests() {
			seen = seen || r.method+" "+r.path == tc.wantReq
		}
		if !seen {
			t.Errorf("%v sent no %s", tc.args, tc.wantReq)
		}
	}
	if code, _, errOut := runCLI(addr, "task", "close"); code != 1 || !strings.Contains(errOut, "missing task ID") {
		t.Errorf("close without an id: exit %d, stderr %q", code, errOut)
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

// TestPromptFromStdinWithAnIDPrefix: "session prompt PREFIX -" sends stdin
// as the prompt of the session the prefix names; the run again with the
// whole id must not read stdin a second time (it was empty then).
func TestPromptFromStdinWithAnIDPrefix(t *testing.T) {
	f, addr := startFake(t)
	const id = "5e55a11f-0000-4000-8000-000000000001"
	f.routes["GET /v1/sessions"] = route{200, `{"sessions":[{"id":"` + id + `","task_id":"t1","state":"WAITING_FOR_INPUT"}]}`}
	f.routes["POST /v1/sessions/"+id+"/prompt"] = route{202, `{"accepted":true}`}
	var out, errb bytes.Buffer
	env := map[string]string{EnvAddress: addr, EnvToken: "tok"}
	code := runWithStdin([]string{"session", "prompt", id[:8], "-", "-detach"}, strings.NewReader("from\nstdin\n"), &out, &errb, func(k string) string { return env[k] })
	if code != 0 || errb.String() != "" {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), "Prompt sent to session "+id) {
		t.Errorf("stdout %q", out.String())
	}
	var sent []string
	for _, r := range f.requests() {
		if r.method == "POST" && r.path == "/v1/sessions/"+id+"/prompt" {
			sent = append(sent, r.path+" "+r.body)
		}
	}
	if len(sent) != 1 || !jsonEqual(strings.SplitN(sent[0], " ", 2)[1], `{"text":"from\nstdin\n"}`) {
		t.Errorf("prompts sent: %q", sent)
	}
}

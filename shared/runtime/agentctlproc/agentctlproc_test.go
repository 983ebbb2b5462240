package agentctlproc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestReadInfoRejectsMalformed(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty":      ``,
		"not_json":   `url=x`,
		"no_nonce":   `{"url":"http://127.0.0.1:1","pid":5}`,
		"zero_pid":   `{"url":"http://127.0.0.1:1","pid":0,"nonce":"n"}`,
		"no_url":     `{"pid":5,"nonce":"n"}`,
		"wrong_type": `{"url":"http://x","pid":"5","nonce":"n"}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadInfo(p); err == nil {
			t.Errorf("%s: accepted %q", name, body)
		}
	}
	if _, err := ReadInfo(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestCheckHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			_, _ = w.Write([]byte(`{"status":"ok","nonce":"n","pid":7,"session_id":"s"}`))
		case "Bearer degraded":
			_, _ = w.Write([]byte(`{"status":"starting"}`))
		case "Bearer garbage":
			_, _ = w.Write([]byte(`{not json`))
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if h, err := CheckHealth(ctx, srv.URL, "good"); err != nil || h.Nonce != "n" || h.PID != 7 {
		t.Fatalf("good: %+v %v", h, err)
	}
	for _, secret := range []string{"bad", "degraded", "garbage"} {
		if _, err := CheckHealth(ctx, srv.URL, secret); err == nil {
			t.Errorf("%s: accepted", secret)
		}
	}
}

func TestProcessChecks(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("own process not alive")
	}
	if Alive(0) || Alive(-1) {
		t.Error("invalid pid alive")
	}
	if IsSessionAgentctl(os.Getpid(), "s1") {
		t.Error("the test binary taken for an agentctl")
	}
}

func TestStartRequiresFields(t *testing.T) {
	if _, err := Start(context.Background(), StartConfig{AgentctlPath: "/bin/true"}); err == nil {
		t.Fatal("incomplete config accepted")
	}
	dir := t.TempDir()
	_, err := Start(context.Background(), StartConfig{AgentctlPath: "/bin/false", SessionID: "s", Workspace: dir, StateDir: filepath.Join(dir, "st"), Secret: "x"})
	if err == nil {
		t.Fatal("an agentctl that exits at once was reported started")
	}
}

package e2e

import (
	"errors"
	"os"
	"strings"
	"testing"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// TestAStoppedSessionWhoseWorkspaceIsGoneIsNotOfferedForResume: the
// workspace of a stopped session is removed behind the server's back. Its
// status must say workspace_missing (not resumable, no resume needed, the
// path in the message) instead of offering a resume that can only fail,
// and a resume is refused with 409 naming the workspace.
func TestAStoppedSessionWhoseWorkspaceIsGoneIsNotOfferedForResume(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "workspace goes"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sess.ID, wire.SessionWaitingForInput)
	if _, err := api.Stop(testCtx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	stopped := waitState(t, api, sess.ID, wire.SessionStopped)

	// With its workspace in place the stopped session is resumable: the
	// check below must not fire on every stopped session.
	st, err := api.SessionStatus(testCtx(t), sess.ID)
	if err != nil || !st.IsResumable || !st.NeedsResume || st.ResumeReason == nil || *st.ResumeReason != wire.ReasonAgentNotRunning {
		t.Fatalf("status of a stopped session with its workspace: %+v %v", st, err)
	}

	ex, err := api.Executor(testCtx(t), stopped.ExecutorID)
	if err != nil || ex.WorkspacePath == "" {
		t.Fatalf("executor of the session: %+v %v", ex, err)
	}
	if err := os.RemoveAll(ex.WorkspacePath); err != nil {
		t.Fatal(err)
	}

	st, err = api.SessionStatus(testCtx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResumeReason == nil || *st.ResumeReason != wire.ReasonWorkspaceMissing || st.IsResumable || st.NeedsResume {
		t.Fatalf("status after the workspace was removed: reason %v resumable %v needs_resume %v; want workspace_missing, false, false",
			strOf(st.ResumeReason), st.IsResumable, st.NeedsResume)
	}
	if st.ResumeMessage == nil || !strings.Contains(*st.ResumeMessage, ex.WorkspacePath) {
		t.Fatalf("resume_message %q does not name the workspace %s", strOf(st.ResumeMessage), ex.WorkspacePath)
	}

	_, err = api.Resume(testCtx(t), sess.ID)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Message, ex.WorkspacePath) {
		t.Fatalf("resume of a session whose workspace is gone: %v; want 409 naming %s", err, ex.WorkspacePath)
	}
	if s, err := api.GetSession(testCtx(t), sess.ID); err != nil || s.State != wire.SessionStopped {
		t.Fatalf("the refused resume changed the session: %+v %v", s, err)
	}
}

func strOf(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// Package enginetest stops and restarts the local Docker engine, for tests
// that prove recovery across an engine restart. Stopping the engine disturbs
// every other engine user, so such tests are gated
// (PADDOCK_DOCKER_ENGINE_RESTART=1) and `make test` runs them alone.
//
// It is for tests only and imports nothing of Paddock.
package enginetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Engine is the one local dockerd, as found running.
type Engine struct {
	t    testing.TB
	pid  int
	argv []string
	// env is dockerd's own environment: restarted with the test's, it
	// would name the test's TMPDIR, and make test's sweep of what a test
	// run left there would kill the engine.
	env []string
}

// Find returns the running dockerd. It skips the test unless it runs as root
// with exactly one local dockerd.
func Find(t testing.TB) *Engine {
	t.Helper()
	out, err := exec.Command("pgrep", "-x", "dockerd").Output()
	pids := strings.Fields(string(out))
	if err != nil || len(pids) != 1 || os.Getuid() != 0 {
		t.Skipf("needs root and exactly one local dockerd (pgrep: %q, %v)", out, err)
	}
	pid, err := strconv.Atoi(pids[0])
	if err != nil {
		t.Fatalf("dockerd pid %q: %v", pids[0], err)
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", pids[0], "cmdline"))
	if err != nil {
		t.Skipf("cannot read dockerd's command line: %v", err)
	}
	environ, err := os.ReadFile(filepath.Join("/proc", pids[0], "environ"))
	if err != nil {
		t.Skipf("cannot read dockerd's environment: %v", err)
	}
	return &Engine{t: t, pid: pid, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"),
		env: strings.FieldsFunc(string(environ), func(r rune) bool { return r == 0 })}
}

// Answers reports whether the engine answers the docker CLI.
func Answers() bool { return exec.Command("docker", "version").Run() == nil }

// Stop sends dockerd SIGTERM and waits until the process is gone (the
// engine stops its containers as it goes). The engine is started again when
// the test ends, before cleanups registered earlier run.
func (e *Engine) Stop() {
	e.t.Helper()
	e.t.Cleanup(e.Start)
	if err := syscall.Kill(e.pid, syscall.SIGTERM); err != nil {
		e.t.Fatalf("stop dockerd: %v", err)
	}
	e.waitFor("dockerd to stop", func() bool {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(e.pid)))
		return err != nil
	})
}

// Start runs dockerd again with its former command line and environment,
// in /, detached and logging to /var/log/dockerd.log, unless the engine answers already, and
// waits until it answers.
func (e *Engine) Start() {
	e.t.Helper()
	if Answers() {
		return
	}
	logf, err := os.OpenFile("/var/log/dockerd.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		e.t.Errorf("dockerd log: %v", err)
		return
	}
	defer logf.Close()
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env, cmd.Dir = append([]string{}, e.env...), "/" // never nil: nil would be the test's
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		e.t.Errorf("restart dockerd: %v", err)
		return
	}
	e.pid = cmd.Process.Pid
	_ = cmd.Process.Release()
	e.waitFor("the engine to answer again", Answers)
}

// waitFor polls cond for up to a minute.
func (e *Engine) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after a minute waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

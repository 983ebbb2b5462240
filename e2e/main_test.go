package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
)

// binDir holds paddock, agentctl, paddock-demo-agent and plugins/.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	binDir = os.Getenv("PADDOCK_BIN")
	if binDir == "" {
		dir, err := os.MkdirTemp("", "paddock-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("make", "-C", "..", "build", "BIN="+dir, "PLUGINS="+filepath.Join(dir, "plugins"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build binaries:", err)
			return 1
		}
		binDir = dir
	}
	return m.Run()
}

// proc is a running paddock server process.
type proc struct {
	t       *testing.T
	name    string
	cfgPath string
	dir     string
	http    string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	exited  chan struct{}
}

// freePortOn returns a free port on a loopback address.
func freePortOn(t *testing.T, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServer runs `paddock server -config cfgPath` in dir.
func startServer(t *testing.T, name, dir, cfgPath, httpAddr string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cfgPath: cfgPath, dir: dir, http: httpAddr}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) start() {
	p.t.Helper()
	p.log = &bytes.Buffer{}
	p.cmd = exec.Command(filepath.Join(binDir, "paddock"), "server", "-config", p.cfgPath)
	p.cmd.Dir = p.dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
	if p.t.Failed() {
		p.t.Logf("--- log of %s ---\n%s", p.name, p.log.String())
	}
}

func (p *proc) client(opts ...client.Option) *client.Client {
	c, err := client.New("http://"+p.http, "", opts...)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// healthy reports whether addr answers /v1/health.
func healthy(addr string) (leader bool, ok bool) {
	resp, err := http.Get("http://" + addr + "/v1/health")
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return strings.Contains(buf.String(), `"leader": true`), resp.StatusCode == 200
}

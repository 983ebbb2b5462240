package agentctl_test

import (
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/agentctl/pin"
)

// TestTLSPinning: agentctl serve -tls serves HTTPS with a key of its own and
// reports its fingerprint; a client pinned to it works, while a man in the
// middle (a TLS proxy with another key, relaying to the real agentctl) is
// refused before any request, the secret included, reaches it; a client
// pinned to another fingerprint and a plain-HTTP client fail too.
func TestTLSPinning(t *testing.T) {
	p := startServeArgs(t, t.TempDir(), []string{"-tls"})
	if !strings.HasPrefix(p.info.URL, "https://") || len(p.info.Fingerprint) != 64 {
		t.Fatalf("info %+v: want an https URL and a SHA-256 fingerprint", p.info)
	}
	c := agentctl.NewPinnedClient(p.info.URL, testSecret, p.info.Fingerprint, 5*time.Second)
	h, err := c.Health(ctx(t))
	if err != nil || h.Nonce != p.info.Nonce {
		t.Fatalf("pinned health: %+v %v", h, err)
	}
	if err := c.WriteFile(ctx(t), "x.txt", []byte("over tls")); err != nil {
		t.Fatal(err)
	}

	// The man in the middle terminates TLS with its own key and relays to
	// agentctl over TLS; it counts the bytes a client got to send it.
	cert, mitmFP, err := pin.New("mitm")
	if err != nil {
		t.Fatal(err)
	}
	if mitmFP == p.info.Fingerprint {
		t.Fatal("two identities share a fingerprint")
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var relayed atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				up, err := tls.Dial("tcp", strings.TrimPrefix(p.info.URL, "https://"), &tls.Config{InsecureSkipVerify: true})
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(conn, up) }()
				n, _ := io.Copy(up, conn)
				relayed.Add(n)
			}()
		}
	}()
	mitmURL := "https://" + l.Addr().String()
	// The proxy works: pinned to its key, a client gets agentctl's answer.
	if h, err := agentctl.NewPinnedClient(mitmURL, testSecret, mitmFP, 5*time.Second).Health(ctx(t)); err != nil || h.Nonce != p.info.Nonce {
		t.Fatalf("through the proxy pinned to its own key: %+v %v", h, err)
	}
	before := relayed.Load()
	_, err = agentctl.NewPinnedClient(mitmURL, testSecret, p.info.Fingerprint, 5*time.Second).Health(ctx(t))
	if !errors.Is(err, pin.ErrFingerprint) {
		t.Fatalf("through a man in the middle: %v, want %v", err, pin.ErrFingerprint)
	}
	if n := relayed.Load() - before; n != 0 {
		t.Fatalf("the man in the middle relayed %d bytes of the refused client", n)
	}

	other := strings.Repeat("0", 64)
	if _, err := agentctl.NewPinnedClient(p.info.URL, testSecret, other, 5*time.Second).Health(ctx(t)); !errors.Is(err, pin.ErrFingerprint) {
		t.Fatalf("pinned to another fingerprint: %v", err)
	}
	if _, err := agentctl.NewClient("http://"+strings.TrimPrefix(p.info.URL, "https://"), testSecret, 5*time.Second).Health(ctx(t)); err == nil {
		t.Fatal("plain HTTP to a TLS agentctl answered")
	}
}

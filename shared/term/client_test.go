package term

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/testkit"
)

// testClient is a paddock.terminal.v1 client that records everything it receives.
type testClient struct {
	t  testing.TB
	ws *websocket.Conn

	mu        sync.Mutex
	out       bytes.Buffer // stream and out-of-band bytes, in arrival order
	pos       int64        // offset + length of the last output frame
	streamLen int          // bytes of stream output received
	maxFrame  int          // the most stream bytes one output frame carried
	msgs      []termproto.Message
	closeCode int
	done      chan struct{}
}

func newTestServer(t testing.TB, opts Options) (*Manager, *httptest.Server) {
	t.Helper()
	if opts.Shell == nil {
		opts.Shell = []string{"/bin/sh"}
	}
	if opts.Env == nil {
		opts.Env = append(os.Environ(), "PS1=$ ", "TERM=xterm-256color")
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	m := NewManager(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.ServeTerminal(w, r, r.URL.Query().Get("name"))
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = m.Close()
	})
	return m, srv
}

func wsURL(srv *httptest.Server, name string) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/?name=" + name
}

// dial connects and sends hello; it does not wait for attached.
func dial(t testing.TB, srv *httptest.Server, name string, h termproto.Hello) *testClient {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}, ReadBufferSize: 64 << 10}
	ws, resp, err := d.Dial(wsURL(srv, name), nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", name, err, resp)
	}
	if ws.Subprotocol() != termproto.Subprotocol {
		t.Fatalf("subprotocol %q", ws.Subprotocol())
	}
	c := &testClient{t: t, ws: ws, done: make(chan struct{})}
	t.Cleanup(func() { _ = ws.Close(); <-c.done })
	if h.Cols == 0 {
		h.Cols, h.Rows = 80, 24
	}
	c.sendJSON(h)
	go c.readLoop()
	return c
}

// attach dials and waits for the attached message.
func attach(t testing.TB, srv *httptest.Server, name string, h termproto.Hello) (*testClient, termproto.Attached) {
	t.Helper()
	c := dial(t, srv, name, h)
	return c, c.waitMsg("attached").(termproto.Attached)
}

func (c *testClient) readLoop() {
	defer close(c.done)
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			c.mu.Lock()
			if errors.As(err, &ce) {
				c.closeCode = ce.Code
			} else {
				c.closeCode = -1
			}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		if typ == websocket.TextMessage {
			m, err := termproto.DecodeServerMessage(b)
			if err != nil {
				c.mu.Unlock()
				c.t.Errorf("bad server message %s: %v", b, err)
				return
			}
			if rd, ok := m.(termproto.ResetDone); ok {
				_ = rd
				c.pos = 0
			}
			c.msgs = append(c.msgs, m)
		} else {
			f, err := termproto.DecodeFrame(b)
			if err != nil {
				c.mu.Unlock()
				c.t.Errorf("bad server frame: %v", err)
				return
			}
			c.out.Write(f.Data)
			if f.Type == termproto.FrameOutput {
				c.pos = f.Offset + int64(len(f.Data))
				c.streamLen += len(f.Data)
				c.maxFrame = max(c.maxFrame, len(f.Data))
			}
		}
		c.mu.Unlock()
	}
}

func (c *testClient) sendJSON(m termproto.Message) {
	b, err := termproto.EncodeMessage(m)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

func (c *testClient) sendRaw(typ int, b []byte) {
	if err := c.ws.WriteMessage(typ, b); err != nil {
		c.t.Fatalf("send raw: %v", err)
	}
}

func (c *testClient) input(s string) {
	c.sendRaw(websocket.BinaryMessage, termproto.EncodeInput([]byte(s)))
}

func (c *testClient) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *testClient) position() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos
}

func (c *testClient) waitOutput(s string) {
	c.t.Helper()
	testkit.WaitFor(c.t, 10*time.Second, "output "+s, testkit.Cond(func() bool { return strings.Contains(c.output(), s) }))
}

// waitMsg waits for the first not yet consumed message of type typ and consumes it.
func (c *testClient) waitMsg(typ string) termproto.Message {
	c.t.Helper()
	var got termproto.Message
	testkit.WaitFor(c.t, 10*time.Second, "message "+typ, testkit.Cond(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, m := range c.msgs {
			if m.MessageType() == typ {
				got = m
				c.msgs = append(c.msgs[:i], c.msgs[i+1:]...)
				return true
			}
		}
		return false
	}))
	return got
}

func (c *testClient) waitClosed() int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.t.Fatal("connection not closed")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode
}

func (c *testClient) messages() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, _ := json.Marshal(c.msgs)
	return string(b)
}

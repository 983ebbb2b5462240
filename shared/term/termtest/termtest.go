// Package termtest is a paddock.terminal.v1 WebSocket client for tests, in the way
// net/http/httptest serves HTTP tests: it dials a terminal, sends the hello, records
// every output byte, output frame and control message it receives, and waits on
// conditions with a timeout. It also drives a POSIX shell on the terminal (markers,
// $$). It is for _test.go files only; it may import shared/term and gorilla/websocket
// and must never import supervisor/.
package termtest

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api/termproto"
)

// DefaultTimeout is how long a Client waits for a condition unless Timeout says otherwise.
const DefaultTimeout = 10 * time.Second

// Frame is the offset and length of one output frame a Client received.
type Frame struct {
	Offset int64
	Len    int64
}

// Client is a paddock.terminal.v1 client that records what it receives. Its read loop
// runs until the connection closes; Dial registers a cleanup that closes it and waits.
type Client struct {
	// Conn is the WebSocket, for tests that write raw frames or close it.
	Conn *websocket.Conn
	// Timeout bounds every Wait method; DefaultTimeout when zero. Set it before waiting.
	Timeout time.Duration

	t    testing.TB
	done chan struct{}

	mu        sync.Mutex
	out       bytes.Buffer // stream and out-of-band bytes, in arrival order
	pos       int64        // offset + length of the last output frame; 0 after a reset
	frames    []Frame
	msgs      []termproto.Message
	closeCode int
}

// Hello encodes h as a hello message, with an 80x24 size when h has none.
func Hello(t testing.TB, h termproto.Hello) []byte {
	t.Helper()
	if h.Cols == 0 {
		h.Cols, h.Rows = 80, 24
	}
	b, err := termproto.EncodeMessage(h)
	if err != nil {
		t.Fatalf("encode hello: %v", err)
	}
	return b
}

// Dial opens a terminal WebSocket at url (ws:// or wss://) with the terminal subprotocol
// and header hdr, sends hello as its first text message and starts reading. A failed
// handshake is returned with the response, if any, for tests that expect a refusal.
func Dial(t testing.TB, url string, hdr http.Header, hello []byte) (*Client, *http.Response, error) {
	t.Helper()
	return DialTLS(t, url, hdr, hello, nil)
}

// DialTLS is Dial for a wss:// url whose server tc verifies (and that may
// ask for tc's client certificate).
func DialTLS(t testing.TB, url string, hdr http.Header, hello []byte, tc *tls.Config) (*Client, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}, HandshakeTimeout: 10 * time.Second, TLSClientConfig: tc}
	ws, resp, err := d.Dial(url, hdr)
	if err != nil {
		return nil, resp, fmt.Errorf("dial terminal %s: %w", url, err)
	}
	c := &Client{Conn: ws, t: t, done: make(chan struct{})}
	t.Cleanup(func() { _ = ws.Close(); <-c.done })
	if err := ws.WriteMessage(websocket.TextMessage, hello); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	go c.readLoop()
	return c, resp, nil
}

func (c *Client) readLoop() {
	defer close(c.done)
	for {
		typ, b, err := c.Conn.ReadMessage()
		if err != nil {
			c.mu.Lock()
			var ce *websocket.CloseError
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
				c.t.Errorf("bad server message %s: %v", b, err)
			} else {
				if _, ok := m.(termproto.ResetDone); ok {
					c.pos = 0
				}
				c.msgs = append(c.msgs, m)
			}
		} else if f, err := termproto.DecodeFrame(b); err != nil {
			c.t.Errorf("bad frame: %v", err)
		} else {
			c.out.Write(f.Data)
			if f.Type == termproto.FrameOutput {
				c.pos = f.Offset + int64(len(f.Data))
				c.frames = append(c.frames, Frame{Offset: f.Offset, Len: int64(len(f.Data))})
			}
		}
		c.mu.Unlock()
	}
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Close closes the connection; WaitClosed waits for the read loop to see it.
func (c *Client) Close() error { return c.Conn.Close() }

// Input sends s as an input frame.
func (c *Client) Input(s string) {
	c.t.Helper()
	if err := c.Conn.WriteMessage(websocket.BinaryMessage, termproto.EncodeInput([]byte(s))); err != nil {
		c.t.Fatalf("input: %v", err)
	}
}

// Send sends the control message m.
func (c *Client) Send(m termproto.Message) {
	c.t.Helper()
	b, err := termproto.EncodeMessage(m)
	if err != nil {
		c.t.Fatalf("encode %T: %v", m, err)
	}
	if err := c.Conn.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// Output is every stream and out-of-band byte received so far, in arrival order.
func (c *Client) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Position is the stream offset after the last output frame (0 after a reset): the
// offset to reattach with.
func (c *Client) Position() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos
}

// Frames is a copy of the offset and length of every output frame received so far.
func (c *Client) Frames() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...)
}

// WaitFor polls cond until it holds, failing the test after the client's timeout.
func (c *Client) WaitFor(what string, cond func() bool) {
	c.t.Helper()
	timeout := c.timeout()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// WaitOutput waits until the output contains s.
func (c *Client) WaitOutput(s string) {
	c.t.Helper()
	c.WaitFor("terminal output "+s, func() bool { return strings.Contains(c.Output(), s) })
}

// WaitMsg waits for the first not yet consumed message of type typ and consumes it.
func (c *Client) WaitMsg(typ string) termproto.Message {
	c.t.Helper()
	var got termproto.Message
	c.WaitFor("terminal message "+typ, func() bool {
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
	})
	return got
}

// WaitClosed waits until the connection is closed and returns its close code
// (-1 when it ended without a close frame).
func (c *Client) WaitClosed() int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(c.timeout()):
		c.t.Fatal("terminal connection not closed")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode
}

// Marker makes the shell print a random marker that the typed line does not contain,
// waits for it and returns it.
func (c *Client) Marker() string {
	c.t.Helper()
	n := rand.IntN(1_000_000)
	c.Input(fmt.Sprintf("echo \"MK$((%d+1))\"\r", n))
	m := fmt.Sprintf("MK%d", n+1)
	c.WaitOutput(m)
	return m
}

var pidRE = regexp.MustCompile(`PID(\d+):`)

// ShellPid makes the shell print $$ and returns it.
func (c *Client) ShellPid() int {
	c.t.Helper()
	before := len(pidRE.FindAllString(c.Output(), -1))
	c.Input("echo \"PID$$:\"\r")
	var pid int
	c.WaitFor("echo $$", func() bool {
		all := pidRE.FindAllStringSubmatch(c.Output(), -1)
		if len(all) <= before {
			return false
		}
		pid, _ = strconv.Atoi(all[len(all)-1][1])
		return true
	})
	return pid
}

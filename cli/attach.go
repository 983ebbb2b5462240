package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	xterm "golang.org/x/term"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
)

// detachKey is ctrl-]: it ends `paddock attach` and leaves the shell running.
// Followed within escapeWindow by resetKey it asks to reset the terminal
// instead (after a y/N confirmation).
const (
	detachKey    = 0x1d
	resetKey     = 'r'
	escapeWindow = time.Second
)

// Timing of attach connections.
const (
	attachPingEvery   = 10 * time.Second
	attachReadTimeout = 30 * time.Second
	attachBackoffMin  = 100 * time.Millisecond
	attachBackoffMax  = 2 * time.Second
	attachDialTimeout = 10 * time.Second
)

var attachCommand = command{
	path:    "attach",
	args:    "SESSION [-name shell] [-force]",
	summary: "attach to a session's terminal (ctrl-] detaches; ctrl-] r resets a shell; a pty agent's terminal that another client controls is taken over after a question, or with -force)",
	bind:    withFlags(attachFlags, runAttach),
	id:      idSession,
}

type attachOpts struct {
	name  *string
	force *bool
}

func attachFlags(fs *flag.FlagSet) *attachOpts {
	return &attachOpts{
		name:  fs.String("name", "shell", "terminal name (\"agent\" is a pty agent's own terminal)"),
		force: fs.Bool("force", false, "take the agent's terminal over from another client without asking"),
	}
}

func runAttach(e *env, o *attachOpts, pos []string) error {
	if err := exactArgs(pos, "SESSION"); err != nil {
		return err
	}
	name := *o.name
	// The terminal route answers a missing session only at the WebSocket
	// upgrade: expand an id prefix first.
	id, err := e.resolveID(idSession, pos[0])
	if err != nil {
		return err
	}
	pos[0] = id
	base, err := client.ParseAddress(e.g.address)
	if err != nil {
		return err
	}
	u := *base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path += "/v1/sessions/" + url.PathEscape(pos[0]) + "/terminal"
	u.RawQuery = url.Values{"name": {name}}.Encode()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	tc, err := e.tlsConfig()
	if err != nil {
		return err
	}
	a := &attacher{url: u.String(), server: e.g.address, sessionID: id, name: name, token: e.g.token, tls: tc, in: os.Stdin, out: e.stdout, errOut: e.stderr, fd: -1}
	if fd := int(os.Stdin.Fd()); xterm.IsTerminal(fd) {
		a.fd = fd
	}
	if name == "agent" && !*o.force {
		if err := e.askTakeover(id, a.fd >= 0); err != nil {
			return err
		}
	}
	if isTerminal(e.stderr) {
		fmt.Fprint(e.stderr, "Connecting…\n") // a progress line: errors stay one line
	}
	return a.run(ctx)
}

// askTakeover asks before attaching to an agent terminal that another live
// client controls (attaching takes it over); without a terminal to ask on
// it refuses.
func (e *env) askTakeover(id string, tty bool) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	st, err := c.SessionStatus(e.ctx(), id)
	if err != nil || ownerOf(st.Controller) != ownerOther {
		return nil // the attach itself reports a session it cannot reach
	}
	q := "this session is " + controllerWords(st.Controller)
	if st.Controller.Via != api.ViaChat {
		who := "a client that did not say who it is"
		if st.Controller.Host != "" {
			who = fmt.Sprintf("%s, pid %d", st.Controller.Host, st.Controller.PID)
		}
		q = fmt.Sprintf("another client (%s) controls this terminal", who)
	}
	return e.askBeforeTakingOver(q, tty, "not attached; the other client keeps the terminal")
}

// askBeforeTakingOver asks question q (who holds what) before taking it
// over; without a terminal to ask on it refuses, naming -force. kept is the
// error of a no.
func (e *env) askBeforeTakingOver(q string, tty bool, kept string) error {
	if !tty {
		return fmt.Errorf("%s; -force takes it over", q)
	}
	fmt.Fprintf(e.stderr, "%s; take it over? [y/N] ", q)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if !isYes(line) {
		return errors.New(kept)
	}
	return nil
}

// attacher is one `paddock attach`: a terminal (raw mode) or pipes (tests, scripts)
// connected to a session terminal, reconnecting with delta replay until detached.
type attacher struct {
	url       string
	server    string // the paddock address, for errors
	sessionID string
	name      string
	tls       *tls.Config // for a wss url (nil: the system's roots)
	token     string
	in        io.Reader
	out       io.Writer
	errOut    io.Writer
	fd        int // stdin's fd when it is a terminal, else -1

	epoch    string
	pos      int64
	hasPos   bool
	pending  string // a notice to print after the next out-of-band frame
	dropped  bool   // the last connection dropped: the next attached is a reconnect
	resets   chan struct{}
	attached chan struct{} // a reconnect is attached: the writer redraws
}

// errDetached ends the attach without an error; errUserDetached is the
// user's ctrl-].
var (
	errDetached     = errors.New("detached")
	errUserDetached = errors.New("detached by the user")
)

// permanentError is a refusal that reconnecting cannot fix; status is the
// HTTP status of a refused upgrade.
type permanentError struct {
	msg    string
	status int
}

// reconnectNotFoundGrace is how long a reconnect keeps trying through "not
// found": a server that just restarted may answer before it has read its
// state back.
const reconnectNotFoundGrace = time.Minute

func (p *permanentError) Error() string { return p.msg }

func (a *attacher) notice(format string, args ...any) {
	fmt.Fprintf(a.errOut, "\r\n[paddock] "+format+"\r\n", args...)
}

func (a *attacher) size() (int, int) {
	if a.fd >= 0 {
		if c, r, err := xterm.GetSize(a.fd); err == nil && c > 0 && r > 0 {
			return min(c, termproto.MaxSize), min(r, termproto.MaxSize)
		}
	}
	return 80, 24
}

func (a *attacher) run(ctx context.Context) error {
	if a.fd >= 0 {
		old, err := xterm.MakeRaw(a.fd)
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer func() { _ = xterm.Restore(a.fd, old) }()
	}
	winch := make(chan os.Signal, 1)
	if a.fd >= 0 {
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
	}
	// The stdin reader cannot be interrupted (a blocked read on a terminal); it ends
	// with the process, which exits right after run returns.
	input := make(chan []byte)
	detach := make(chan struct{})
	a.resets = make(chan struct{}, 1)
	a.attached = make(chan struct{}, 1)
	chunks := make(chan []byte)
	go readChunks(a.in, chunks)
	go a.keys(chunks, input, detach)

	// The first connection must succeed; once attached, drops are retried until the
	// user detaches.
	everAttached := false
	var notFoundSince time.Time
	backoff := attachBackoffMin
	for {
		err := a.session(ctx, input, detach, winch)
		var perm *permanentError
		isPerm := errors.As(err, &perm)
		if isPerm && everAttached && perm.status == http.StatusNotFound {
			if notFoundSince.IsZero() {
				notFoundSince = time.Now()
			}
			if time.Since(notFoundSince) < reconnectNotFoundGrace {
				err, isPerm = errors.New(perm.msg), false
			}
		}
		switch {
		case errors.Is(err, errUserDetached):
			// The shell prompt that follows starts on a line of its own.
			fmt.Fprint(a.out, "\r\n")
			return nil
		case errors.Is(err, errDetached), ctx.Err() != nil:
			return nil
		case isPerm:
			return err
		case errors.Is(err, errConnected):
			everAttached = true
			a.dropped = true
			notFoundSince = time.Time{}
			backoff = attachBackoffMin
			a.notice("connection lost; reconnecting… (ctrl-] detaches)")
		case !everAttached:
			return err
		default:
			backoff = min(backoff*2, attachBackoffMax)
		}
		select {
		case <-detach:
			fmt.Fprint(a.out, "\r\n")
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// errConnected marks a session that was attached before it dropped.
var errConnected = errors.New("connection dropped")

// readChunks forwards what stdin reads; it closes chunks at EOF.
func readChunks(in io.Reader, chunks chan<- []byte) {
	defer close(chunks)
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			chunks <- append([]byte(nil), buf[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// keys forwards stdin to input, except the attach's own keys: ctrl-] alone
// (or at EOF) closes detach; ctrl-] then r asks whether to reset the
// terminal and, on y, queues a reset.
func (a *attacher) keys(chunks <-chan []byte, input chan<- []byte, detach chan<- struct{}) {
	defer close(detach)
	const (
		typing = iota
		escaped
		confirming
	)
	mode := typing
	var window <-chan time.Time
	// Typed bytes wait here while no connection takes them, so the attach's
	// own keys still work during a reconnect; beyond maxPendingInput they
	// are dropped.
	var pending [][]byte
	queued := 0
	forward := func(p []byte) {
		if queued+len(p) <= maxPendingInput {
			pending = append(pending, p)
			queued += len(p)
		}
	}
	// What was typed before the detach goes first, if a connection takes
	// it within a second.
	defer func() {
		give := time.After(time.Second)
		for _, p := range pending {
			select {
			case input <- p:
			case <-give:
				return
			}
		}
	}()
	for {
		var out chan<- []byte
		var next []byte
		if len(pending) > 0 {
			out, next = input, pending[0]
		}
		var p []byte
		select {
		case out <- next:
			pending, queued = pending[1:], queued-len(next)
			continue
		case c, ok := <-chunks:
			if !ok {
				return
			}
			p = c
		case <-window:
			return // ctrl-] and nothing after it: detach
		}
		for len(p) > 0 {
			switch mode {
			case typing:
				i := bytes.IndexByte(p, detachKey)
				if i < 0 {
					forward(p)
					p = nil
					continue
				}
				if i > 0 {
					forward(p[:i])
				}
				p = p[i+1:]
				mode, window = escaped, time.After(escapeWindow)
			case escaped:
				if p[0] != resetKey {
					return
				}
				if a.name == "agent" {
					// The agent's terminal runs the agent, not a shell.
					p, window, mode = p[1:], nil, typing
					a.notice("the agent's terminal is not reset from here: \"paddock session stop %s\" and \"paddock session resume %s\" restart the agent's program", a.sessionID, a.sessionID)
					continue
				}
				p, window, mode = p[1:], nil, confirming
				a.notice("reset the terminal? Its program is ended and a new shell started. [y/N]")
			case confirming:
				if p[0] == 'y' || p[0] == 'Y' {
					select {
					case a.resets <- struct{}{}:
					default:
					}
				} else {
					a.notice("not reset")
				}
				p, mode = p[1:], typing
			}
		}
	}
}

// maxPendingInput bounds the typed bytes kept while no connection takes them.
const maxPendingInput = 64 << 10

// session runs one connection: it returns errDetached, a permanentError, errConnected
// when an attached connection dropped, or the dial error.
func (a *attacher) session(ctx context.Context, input <-chan []byte, detach <-chan struct{}, winch <-chan os.Signal) error {
	d := websocket.Dialer{Proxy: nil, HandshakeTimeout: attachDialTimeout, Subprotocols: []string{termproto.Subprotocol}, ReadBufferSize: 64 << 10, TLSClientConfig: a.tls}
	hdr := http.Header{}
	if a.token != "" {
		hdr.Set("Authorization", "Bearer "+a.token)
	}
	ws, resp, err := d.DialContext(ctx, a.url, hdr)
	if err != nil {
		if resp != nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			msg := fmt.Sprintf("attach refused: %s %s", resp.Status, apiMessage(b))
			if resp.StatusCode < 500 {
				return &permanentError{msg: msg, status: resp.StatusCode}
			}
			return errors.New(msg)
		}
		return fmt.Errorf("cannot reach paddock at %s: %w", orDefault(a.server, "the server"), unwrapDial(err))
	}
	defer ws.Close()
	ws.SetReadLimit(termproto.MaxFrameBytes + 64)

	cols, rows := a.size()
	me := self()
	h := termproto.Hello{Cols: cols, Rows: rows, Client: &me}
	if a.hasPos {
		pos := a.pos
		h.Epoch, h.Offset = a.epoch, &pos
	}
	hello, _ := termproto.EncodeMessage(h)
	if err := ws.WriteMessage(websocket.TextMessage, hello); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}

	// The writer is the socket's only writer: input, resizes, acks, pings, detach.
	acks := make(chan int64, 1)
	done := make(chan struct{})
	writerErr := make(chan error, 1)
	go func() { writerErr <- a.writeLoop(ws, input, detach, winch, acks, done) }()
	err = a.readLoop(ws, acks)
	close(done)
	werr := <-writerErr
	if errors.Is(werr, errUserDetached) {
		return errUserDetached
	}
	return err
}

func (a *attacher) writeLoop(ws *websocket.Conn, input <-chan []byte, detach <-chan struct{}, winch <-chan os.Signal, acks <-chan int64, done <-chan struct{}) error {
	ping := time.NewTicker(attachPingEvery)
	defer ping.Stop()
	send := func(m termproto.Message) error {
		b, _ := termproto.EncodeMessage(m)
		return ws.WriteMessage(websocket.TextMessage, b)
	}
	for {
		var err error
		select {
		case <-done:
			return nil
		case p := <-input:
			err = ws.WriteMessage(websocket.BinaryMessage, termproto.EncodeInput(p))
		case <-detach:
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "detached"), time.Now().Add(time.Second))
			_ = ws.Close()
			return errUserDetached
		case <-winch:
			c, r := a.size()
			err = send(termproto.Resize{Cols: c, Rows: r})
		case <-a.resets:
			err = send(termproto.Reset{})
		case <-a.attached:
			// A reconnect: the notices printed over the program's screen, so
			// it is made to redraw by a window size change and back.
			c, r := a.size()
			if r > termproto.MinSize {
				if err = send(termproto.Resize{Cols: c, Rows: r - 1}); err == nil {
					err = send(termproto.Resize{Cols: c, Rows: r})
				}
			}
		case off := <-acks:
			err = send(termproto.Ack{Offset: off})
		case <-ping.C:
			err = send(termproto.Ping{})
		}
		if err != nil {
			_ = ws.Close() // unblocks the reader
			return err
		}
	}
}

// readLoop prints the stream and handles control messages until the connection ends.
func (a *attacher) readLoop(ws *websocket.Conn, acks chan int64) error {
	attached := false
	for {
		_ = ws.SetReadDeadline(time.Now().Add(attachReadTimeout))
		typ, b, err := ws.ReadMessage()
		if err != nil {
			return a.closed(err, attached)
		}
		if typ == websocket.BinaryMessage {
			f, err := termproto.DecodeFrame(b)
			if err != nil {
				continue // not ours to die on
			}
			if _, err := a.out.Write(f.Data); err != nil {
				return &permanentError{msg: fmt.Sprintf("write output: %v", err)}
			}
			switch f.Type {
			case termproto.FrameOutput:
				a.pos, a.hasPos = f.Offset+int64(len(f.Data)), a.epoch != ""
				select { // credit flow control: the latest position wins
				case acks <- a.pos:
				default:
					select {
					case <-acks:
					default:
					}
					acks <- a.pos
				}
			case termproto.FrameOutOfBand:
				if a.pending != "" {
					a.notice("%s", a.pending)
					a.pending = ""
				}
			}
			continue
		}
		msg, err := termproto.DecodeServerMessage(b)
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case termproto.Attached:
			attached = true
			if !a.hasPos && a.sessionID != "" {
				fmt.Fprintf(a.errOut, "attached to %s (%s); ctrl-] detaches\r\n", a.sessionID, a.name)
			}
			a.epoch, a.pos, a.hasPos = m.Epoch, m.Offset, true
			if a.dropped {
				a.dropped = false
				a.notice("reconnected")
				select {
				case a.attached <- struct{}{}:
				default:
				}
			}
		case termproto.ResetDone:
			a.epoch, a.pos = m.Epoch, 0
			a.pending = "the terminal was reset: a new shell started"
		case termproto.Exited:
			a.notice("the shell exited with code %d; the next attach starts a new one", m.Code)
			return errDetached
		case termproto.TakenOver:
			a.notice("another client took over this terminal")
			return errDetached
		case termproto.Error:
			if m.Code == termproto.CodeUnauth {
				return &permanentError{msg: "attach refused: " + m.Message}
			}
			a.notice("error: %s", m.Message)
		}
	}
}

// unwrapDial is a dial error without the URL it names (a *net.OpError says
// what failed: "connect: connection refused").
func unwrapDial(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	return err
}

// closed turns a read error into the session's outcome.
func (a *attacher) closed(err error, attached bool) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case termproto.CloseTakenOver:
			a.notice("another client took over this terminal")
			return errDetached
		case termproto.CloseUnauthorized, termproto.CloseBadHello:
			return &permanentError{msg: fmt.Sprintf("attach refused: %s (close %d)", ce.Text, ce.Code)}
		case termproto.CloseTerminalGone:
			a.hasPos = false // a fresh terminal next time
		}
	}
	if attached {
		return errConnected
	}
	return fmt.Errorf("connection ended: %w", err)
}

// apiMessage extracts the message of an API error body.
func apiMessage(b []byte) string {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
		return fmt.Sprintf("%s (%s)", body.Error.Message, body.Error.Code)
	}
	return strings.TrimSpace(string(b))
}

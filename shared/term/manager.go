package term

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
	"github.com/paddockhq/paddock/api/termproto"
)

// Defaults for Options.
const (
	DefaultIdleTimeout  = 30 * time.Minute
	DefaultCreditWindow = 256 << 10
	DefaultMaxTerminals = 16
	DefaultHelloTimeout = 10 * time.Second
)

// Output coalescing during floods: after a frame of at least coalesceTrigger bytes, a
// writer that finds fewer than coalesceMin bytes waits coalesceDelay for more. It only
// applies when the shell may run at least coalesceRoom bytes ahead of the client, so
// the wait never stalls the shell of a small ring or credit window. (Frames of 128 KiB
// with a 2 ms delay were tried: the relay's CPU per MiB fell by a third, but the
// agentctl path's throughput ratio fell by ~8% in eight of eight paired runs.)
const (
	coalesceTrigger = 4 << 10
	coalesceMin     = 16 << 10
	coalesceDelay   = time.Millisecond
	coalesceRoom    = 2 * MaxLiveChunk
)

// MaxLiveChunk is the most stream bytes one live output frame carries (the frame is 9
// bytes longer). Output that piles up while the socket is busy goes out in frames this
// large, so a flood costs every hop (agentctl, the supervisor's relay, the client) half
// the messages that MaxChunk-sized frames would. A client that acks gets frames of at
// most a quarter of its credit window (MaxChunk at least), so several stay in flight
// while its acks come back.
const MaxLiveChunk = 64 << 10

// ResetSequence is sent as an out-of-band frame before a full replay: RIS, a full
// terminal reset, so the replay does not mix with what the screen held.
var ResetSequence = []byte("\x1bc")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Options configures a Manager. Zero values take the documented defaults.
type Options struct {
	// Shell is the argv of new terminals (default: $SHELL, else /bin/sh).
	Shell []string
	// Dir is the shells' working directory.
	Dir string
	// Env is the shells' environment (nil = this process's).
	Env []string
	// Credential, when set, runs the shells as that user and group.
	Credential *syscall.Credential
	// Nice, when not 0, is the nice value the shells run at.
	Nice int
	// ReplayBytes is each terminal's ring size (DefaultReplayBytes).
	ReplayBytes int
	// IdleTimeout ends a terminal that has had no connection this long (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// CreditWindow is how far live output may run ahead of a client's acks (DefaultCreditWindow).
	CreditWindow int
	// MaxTerminals bounds the number of named terminals (DefaultMaxTerminals).
	MaxTerminals int
	// External maps terminal names to PTYs owned by someone else (agentctl serves its
	// pty agent as "agent"): attaching such a name shows that PTY instead of starting a
	// shell; reset is refused while its program runs. The func is called on first
	// attach and, once the program has exited, on the next attach to pick up a new one.
	External map[string]func() (External, error)
	// ExternalFor, when set, is asked about names External lacks: a non-nil
	// func makes the name an External terminal as if it were in External
	// (agentctl's command terminals cmd-1, cmd-2, …, which come and go).
	ExternalFor func(name string) func() (External, error)
	// Names, when set, lists the only terminal names that may be attached; others get 404.
	Names []string
	// HelloTimeout bounds the wait for the client's hello (DefaultHelloTimeout).
	HelloTimeout time.Duration
	// CheckOrigin decides whether a WebSocket Origin is acceptable. Nil uses gorilla's
	// same-origin check; callers that check Origin themselves pass a func returning true.
	CheckOrigin func(r *http.Request) bool
	// Authorize, when set, vets the hello's token; an error ends the connection with an
	// unauthorized error and close code 4003.
	Authorize func(r *http.Request, token string) error
	// OnAttached, when set, is called with the number of terminals that
	// have a connection each time it changes (under the manager's lock, so
	// calls come in order).
	OnAttached func(attached int)
	// Logger receives diagnostics (a null logger if nil).
	Logger hclog.Logger
}

// Manager holds the named terminals of one session and serves them over WebSockets.
type Manager struct {
	opts     Options
	log      hclog.Logger
	upgrader websocket.Upgrader
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // ServeTerminal calls
	frames   sync.Pool      // *[]byte of 9+MaxLiveChunk: a live frame, held only while it is sent

	mu       sync.Mutex
	closed   bool
	entries  map[string]*entry
	attached int // entries with a connection
}

type entry struct {
	name string
	term *Terminal
	conn *conn       // the controlling connection, nil when detached
	ctrl Controller  // who conn is, while conn is set
	idle *time.Timer // running while detached
	gen  uint64      // bumped on every attach/detach to invalidate stale idle timers
}

// NewManager returns a Manager; terminals start on first attach.
func NewManager(opts Options) *Manager {
	if len(opts.Shell) == 0 {
		if sh := os.Getenv("SHELL"); sh != "" {
			opts.Shell = []string{sh}
		} else {
			opts.Shell = []string{"/bin/sh"}
		}
	}
	if opts.ReplayBytes <= 0 {
		opts.ReplayBytes = DefaultReplayBytes
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.CreditWindow <= 0 {
		opts.CreditWindow = DefaultCreditWindow
	}
	if opts.MaxTerminals <= 0 {
		opts.MaxTerminals = DefaultMaxTerminals
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = DefaultHelloTimeout
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		opts: opts,
		log:  opts.Logger,
		upgrader: websocket.Upgrader{
			ReadBufferSize: 16 << 10,
			// WriteMessage sends a longer message as one frame in one writev (the
			// buffer's head plus the rest in place), so the buffer need not hold a
			// live frame; a small one keeps idle connections small.
			WriteBufferSize: 4 << 10,
			Subprotocols:    []string{termproto.Subprotocol},
			CheckOrigin:     opts.CheckOrigin,
		},
		frames:  sync.Pool{New: func() any { b := make([]byte, 9+MaxLiveChunk); return &b }},
		ctx:     ctx,
		cancel:  cancel,
		entries: make(map[string]*entry),
	}
}

// Terminal returns the named terminal if it is running.
func (m *Manager) Terminal(name string) (*Terminal, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[name]
	if !ok {
		return nil, false
	}
	return e.term, true
}

// Controller is the connection controlling a terminal: the identity its hello gave
// (empty fields when it gave none) and when it attached.
type Controller struct {
	termproto.ClientID
	Since time.Time `json:"since"`
}

// Controller reports who controls the named terminal; false when no connection does.
func (m *Manager) Controller(name string) (Controller, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[name]
	if !ok || e.conn == nil {
		return Controller{}, false
	}
	return e.ctrl, true
}

// Names lists the running terminals.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.entries))
	for n := range m.entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Close ends every connection and terminal and waits for them.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return nil
	}
	m.closed = true
	entries := m.entries
	m.entries = map[string]*entry{}
	for _, e := range entries {
		if e.idle != nil {
			e.idle.Stop()
		}
	}
	m.mu.Unlock()
	m.cancel()
	for _, e := range entries {
		_ = e.term.Close()
	}
	m.wg.Wait()
	return nil
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// ServeTerminal upgrades r to a paddock.terminal.v1 WebSocket attached to the named
// terminal (started on first use) and serves it until the client leaves, is taken over,
// or the Manager closes. Refusals before the upgrade are JSON errors: 400 for a bad
// name or missing subprotocol, 404 for a name not in Options.Names, 503 when closed.
func (m *Manager) ServeTerminal(w http.ResponseWriter, r *http.Request, name string) {
	if !nameRE.MatchString(name) {
		httpError(w, http.StatusBadRequest, termproto.CodeBadRequest, fmt.Sprintf("invalid terminal name %q", name))
		return
	}
	if m.opts.Names != nil && !slices.Contains(m.opts.Names, name) {
		httpError(w, http.StatusNotFound, "not_found", fmt.Sprintf("unknown terminal %q", name))
		return
	}
	if !slices.Contains(websocket.Subprotocols(r), termproto.Subprotocol) {
		httpError(w, http.StatusBadRequest, termproto.CodeBadRequest, "WebSocket subprotocol "+termproto.Subprotocol+" required")
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable, "unavailable", "terminals are shutting down")
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()

	ws, err := m.upgrader.Upgrade(w, r, nil)
	if err != nil {
		m.log.Debug("terminal upgrade failed", "name", name, "error", err)
		return // the upgrader has answered
	}
	ws.SetReadLimit(termproto.MaxFrameBytes)
	c := newConn(m, ws, name)
	c.serve(r)
}

// attach makes c the controller of the named terminal, starting or reviving the shell.
// It returns the terminal and a notice for the client ("" if none).
func (m *Manager) attach(c *conn, h termproto.Hello) (*Terminal, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, "", errors.New("terminals are shutting down")
	}
	e, ok := m.entries[c.name]
	if !ok {
		if len(m.entries) >= m.opts.MaxTerminals {
			return nil, "", fmt.Errorf("too many terminals (max %d)", m.opts.MaxTerminals)
		}
		t, err := NewTerminal(TerminalConfig{
			Argv: m.opts.Shell, Dir: m.opts.Dir, Env: m.opts.Env, Credential: m.opts.Credential, Nice: m.opts.Nice,
			Cols: h.Cols, Rows: h.Rows, ReplayBytes: m.opts.ReplayBytes,
			External: m.external(c.name),
			Logger:   m.log.Named(c.name),
		})
		if err != nil {
			return nil, "", fmt.Errorf("start terminal %q: %w", c.name, err)
		}
		e = &entry{name: c.name, term: t}
		m.entries[c.name] = e
	}
	notice := ""
	if exited, code := e.term.Exited(); exited {
		err := e.term.Reset()
		switch {
		case err == nil && e.term.cfg.External != nil:
			notice = fmt.Sprintf("the previous program exited with code %d; showing the new one", code)
		case err == nil:
			notice = fmt.Sprintf("the previous shell exited with code %d; a new shell was started", code)
		case e.term.cfg.External != nil:
			// Nothing new to show: attach to the exited program's output.
			notice = fmt.Sprintf("the program exited with code %d", code)
		default:
			return nil, "", fmt.Errorf("restart terminal %q: %w", c.name, err)
		}
	}
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	if e.conn != nil {
		e.conn.takeOver()
	} else {
		m.setAttached(+1)
	}
	e.conn = c
	e.ctrl = Controller{Since: time.Now().UTC()}
	if h.Client != nil {
		e.ctrl.ClientID = *h.Client
	}
	e.gen++
	_ = e.term.Resize(h.Cols, h.Rows)
	return e.term, notice, nil
}

// external is the External source of the named terminal (nil: a shell).
func (m *Manager) external(name string) func() (External, error) {
	if f := m.opts.External[name]; f != nil {
		return f
	}
	if m.opts.ExternalFor != nil {
		return m.opts.ExternalFor(name)
	}
	return nil
}

// detach releases c's hold on its terminal and starts the idle timer.
func (m *Manager) detach(c *conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[c.name]
	if !ok || e.conn != c {
		return
	}
	e.conn = nil
	m.setAttached(-1)
	e.ctrl = Controller{}
	e.gen++
	gen := e.gen
	e.idle = time.AfterFunc(m.opts.IdleTimeout, func() { m.expire(e, gen) })
}

// setAttached counts a terminal's connection attaching (+1) or detaching
// (-1) and tells OnAttached. The caller holds m.mu.
func (m *Manager) setAttached(d int) {
	m.attached += d
	if f := m.opts.OnAttached; f != nil {
		f(m.attached)
	}
}

// expire ends a terminal that stayed detached for the idle timeout.
func (m *Manager) expire(e *entry, gen uint64) {
	m.mu.Lock()
	if m.closed || m.entries[e.name] != e || e.gen != gen || e.conn != nil {
		m.mu.Unlock()
		return
	}
	delete(m.entries, e.name)
	m.mu.Unlock()
	m.log.Info("terminal idle, ending it", "name", e.name, "idle_timeout", m.opts.IdleTimeout)
	_ = e.term.Close()
}

// conn is one WebSocket attached to a terminal. Its serve goroutine reads; one writer
// goroutine does every write.
type conn struct {
	m    *Manager
	ws   *websocket.Conn
	name string
	log  hclog.Logger

	ctrl      chan termproto.Message // control messages for the writer
	wake      chan struct{}          // acks, takeover
	acked     atomic.Int64
	acking    atomic.Bool
	takenOver atomic.Bool
}

func newConn(m *Manager, ws *websocket.Conn, name string) *conn {
	return &conn{m: m, ws: ws, name: name, log: m.log.With("terminal", name),
		ctrl: make(chan termproto.Message, 32), wake: make(chan struct{}, 1)}
}

func (c *conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// takeOver is called (under the manager lock) when another connection attaches.
func (c *conn) takeOver() {
	c.takenOver.Store(true)
	c.poke()
}

// send queues a control message for the writer; it gives up when ctx ends.
func (c *conn) send(ctx context.Context, msg termproto.Message) {
	select {
	case c.ctrl <- msg:
	case <-ctx.Done():
	}
}

func (c *conn) writeJSON(msg termproto.Message) error {
	b, err := termproto.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *conn) closeWith(code int, text string) {
	msg := websocket.FormatCloseMessage(code, text)
	_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	_ = c.ws.Close()
}

func (c *conn) readHello(r *http.Request) (termproto.Hello, bool) {
	_ = c.ws.SetReadDeadline(time.Now().Add(c.m.opts.HelloTimeout))
	defer func() { _ = c.ws.SetReadDeadline(time.Time{}) }()
	typ, b, err := c.ws.ReadMessage()
	if err != nil {
		c.log.Debug("no hello", "error", err)
		_ = c.ws.Close()
		return termproto.Hello{}, false
	}
	fail := func(code, msg string, closeCode int) (termproto.Hello, bool) {
		_ = c.writeJSON(termproto.Error{Code: code, Message: msg})
		c.closeWith(closeCode, msg)
		return termproto.Hello{}, false
	}
	if typ != websocket.TextMessage {
		return fail(termproto.CodeBadRequest, "the first message must be a JSON hello", termproto.CloseBadHello)
	}
	msg, err := termproto.DecodeClientMessage(b)
	if err != nil {
		return fail(termproto.CodeBadRequest, "hello: "+err.Error(), termproto.CloseBadHello)
	}
	h, ok := msg.(termproto.Hello)
	if !ok {
		return fail(termproto.CodeBadRequest, "the first message must be a hello, got "+msg.MessageType(), termproto.CloseBadHello)
	}
	if c.m.opts.Authorize != nil {
		if err := c.m.opts.Authorize(r, h.Token); err != nil {
			return fail(termproto.CodeUnauth, "unauthorized", termproto.CloseUnauthorized)
		}
	}
	return h, true
}

func (c *conn) serve(r *http.Request) {
	h, ok := c.readHello(r)
	if !ok {
		return
	}
	t, notice, err := c.m.attach(c, h)
	if err != nil {
		_ = c.writeJSON(termproto.Error{Code: termproto.CodeInternal, Message: err.Error()})
		c.closeWith(websocket.CloseTryAgainLater, "terminal unavailable")
		return
	}
	defer c.m.detach(c)

	ctx, cancel := context.WithCancel(c.m.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		if err := c.writeLoop(ctx, t, h, notice); err != nil {
			c.log.Debug("terminal writer ended", "error", err)
		}
		_ = c.ws.Close() // unblocks the reader
	}()
	c.readLoop(ctx, t)
	cancel()
	wg.Wait()
	_ = c.ws.Close()
}

// readLoop handles client frames until the socket fails.
func (c *conn) readLoop(ctx context.Context, t *Terminal) {
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if typ == websocket.BinaryMessage {
			f, err := termproto.DecodeFrame(b)
			switch {
			case errors.Is(err, termproto.ErrFrameTooBig):
				c.send(ctx, termproto.Error{Code: termproto.CodeTooLarge, Message: err.Error()})
			case err != nil:
				c.send(ctx, termproto.Error{Code: termproto.CodeBadRequest, Message: err.Error()})
			case f.Type != termproto.FrameInput:
				c.send(ctx, termproto.Error{Code: termproto.CodeBadRequest, Message: fmt.Sprintf("frame type 0x%02x is server → client only", f.Type)})
			default:
				if _, err := t.Write(f.Data); err != nil {
					if errors.Is(err, ErrExited) {
						c.send(ctx, termproto.Error{Code: termproto.CodeExited, Message: "the shell has exited; send reset or reconnect for a new one"})
					} else {
						c.send(ctx, termproto.Error{Code: termproto.CodeInternal, Message: err.Error()})
					}
				}
			}
			continue
		}
		msg, err := termproto.DecodeClientMessage(b)
		if err != nil {
			code := termproto.CodeBadRequest
			if errors.Is(err, termproto.ErrFrameTooBig) {
				code = termproto.CodeTooLarge
			}
			c.send(ctx, termproto.Error{Code: code, Message: err.Error()})
			continue
		}
		switch msg := msg.(type) {
		case termproto.Resize:
			if err := t.Resize(msg.Cols, msg.Rows); err != nil {
				c.send(ctx, termproto.Error{Code: termproto.CodeBadRequest, Message: err.Error()})
			}
		case termproto.Reset:
			if err := t.Reset(); err != nil {
				c.send(ctx, termproto.Error{Code: termproto.CodeInternal, Message: err.Error()})
			}
		case termproto.Ack:
			c.acked.Store(msg.Offset)
			c.acking.Store(true)
			c.poke()
		case termproto.Ping:
			c.send(ctx, termproto.Pong{})
		case termproto.Hello:
			c.send(ctx, termproto.Error{Code: termproto.CodeBadRequest, Message: "already attached: hello is only the first message"})
		}
	}
}

// writeLoop is the connection's only writer: the attach answer and replay, then live
// output pulled from the ring (so a slow client never slows the shell), control
// messages, exit and reset notices, and the takeover.
func (c *conn) writeLoop(ctx context.Context, t *Terminal, h termproto.Hello, notice string) error {
	st := t.State()
	from := int64(-1)
	if h.Epoch != "" && h.Epoch == st.Epoch && h.Offset != nil {
		from = *h.Offset
	}
	frames, kind, pos := st.Ring.Replay(from)
	if err := c.writeJSON(termproto.Attached{Name: c.name, Epoch: st.Epoch, Offset: pos, Replay: kind, Pid: st.Pid, Notice: notice}); err != nil {
		return fmt.Errorf("write attached: %w", err)
	}
	if kind == termproto.ReplayFull {
		if err := c.ws.WriteMessage(websocket.BinaryMessage, termproto.EncodeOutOfBand(ResetSequence)); err != nil {
			return fmt.Errorf("write reset: %w", err)
		}
	}
	if notice != "" {
		text := "\r\n\x1b[7m[paddock] " + notice + "\x1b[0m\r\n"
		if err := c.ws.WriteMessage(websocket.BinaryMessage, termproto.EncodeOutOfBand([]byte(text))); err != nil {
			return fmt.Errorf("write notice: %w", err)
		}
	}
	for _, f := range frames {
		if err := c.ws.WriteMessage(websocket.BinaryMessage, EncodeOutput(f)); err != nil {
			return fmt.Errorf("write replay: %w", err)
		}
	}
	epoch, ring := st.Epoch, st.Ring
	c.acked.Store(pos)
	// Hold the shell back so this client never falls a ring behind (and, once it acks,
	// never more than the credit window ahead of its acks).
	window := int64(c.m.opts.CreditWindow)
	ringLimit := max(int64(ring.Size()-MaxChunk), int64(ring.Size()/2))
	pacer := NewPacer(pos, ringLimit)
	t.SetPacer(epoch, pacer)
	defer func() {
		t.SetPacerIf(pacer, nil)
		pacer.Release()
	}()
	advance := func() {
		if c.acking.Load() {
			pacer.SetLimit(min(window, ringLimit))
			pacer.Advance(min(c.acked.Load(), pos))
		} else {
			pacer.Advance(pos)
		}
	}
	announced := false
	lastFrame, lastSend := 0, time.Time{}
	coalesce := time.NewTimer(time.Hour)
	coalesce.Stop()
	defer coalesce.Stop()

	for {
		if c.takenOver.Load() {
			_ = c.ws.SetWriteDeadline(time.Now().Add(time.Second))
			_ = c.writeJSON(termproto.TakenOver{})
			c.closeWith(termproto.CloseTakenOver, "taken over by another connection")
			return nil
		}
		select {
		case msg := <-c.ctrl:
			if err := c.writeJSON(msg); err != nil {
				return fmt.Errorf("write %s: %w", msg.MessageType(), err)
			}
			continue
		default:
		}
		st = t.State()
		if st.Closed {
			_ = c.writeJSON(termproto.Error{Code: "terminal_ended", Message: "the terminal was ended"})
			c.closeWith(termproto.CloseTerminalGone, "terminal ended")
			return nil
		}
		if st.Epoch != epoch {
			epoch, ring, pos, announced = st.Epoch, st.Ring, 0, false
			c.acked.Store(0)
			pacer.Release()
			pacer = NewPacer(0, ringLimit)
			t.SetPacer(epoch, pacer)
			if err := c.writeJSON(termproto.ResetDone{Epoch: epoch, Pid: st.Pid}); err != nil {
				return fmt.Errorf("write reset: %w", err)
			}
			if err := c.ws.WriteMessage(websocket.BinaryMessage, termproto.EncodeOutOfBand(ResetSequence)); err != nil {
				return fmt.Errorf("write reset: %w", err)
			}
			continue
		}
		limit, room := MaxLiveChunk, ringLimit
		if c.acking.Load() {
			frame := max(int64(MaxChunk), window/4)
			limit = int(min(int64(MaxLiveChunk), frame, window-max(0, pos-c.acked.Load())))
			room = min(window, ringLimit)
		}
		if limit >= coalesceMin && room >= coalesceRoom && lastFrame >= coalesceTrigger && time.Since(lastSend) < 5*time.Millisecond {
			// During a flood the PTY hands over ~4 KiB per read; wait a moment so frames
			// carry tens of KiB instead (interactive echo never gets here).
			if avail := ring.Next() - pos; avail > 0 && avail < coalesceMin {
				coalesce.Reset(coalesceDelay)
				select {
				case <-ctx.Done():
					return nil
				case <-coalesce.C:
				}
			}
		}
		if limit > 0 {
			bp := c.m.frames.Get().(*[]byte)
			buf := *bp
			n, err := ring.ReadAt(buf[9:9+limit], pos)
			if n == 0 || err != nil {
				c.m.frames.Put(bp)
			}
			if errors.Is(err, ErrOverwritten) {
				// The client fell a whole ring behind: start it over with a full replay.
				frames, _, end := ring.Replay(-1)
				if err := c.ws.WriteMessage(websocket.BinaryMessage, termproto.EncodeOutOfBand(ResetSequence)); err != nil {
					return fmt.Errorf("write reset: %w", err)
				}
				for _, f := range frames {
					if err := c.ws.WriteMessage(websocket.BinaryMessage, EncodeOutput(f)); err != nil {
						return fmt.Errorf("write replay: %w", err)
					}
				}
				pos = end
				c.acked.Store(pos)
				advance()
				continue
			}
			if err != nil {
				return fmt.Errorf("read ring: %w", err)
			}
			if n > 0 {
				termproto.AppendOutput(buf[:0], pos, nil)
				err := c.ws.WriteMessage(websocket.BinaryMessage, buf[:9+n])
				c.m.frames.Put(bp)
				if err != nil {
					return fmt.Errorf("write output: %w", err)
				}
				pos += int64(n)
				lastFrame, lastSend = n, time.Now()
				advance()
				continue
			}
		}
		if st.Exited && !announced && pos == ring.Next() {
			announced = true
			if err := c.writeJSON(termproto.Exited{Code: st.ExitCode}); err != nil {
				return fmt.Errorf("write exited: %w", err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-st.Changed:
		case <-c.wake:
			advance()
		case msg := <-c.ctrl:
			if err := c.writeJSON(msg); err != nil {
				return fmt.Errorf("write %s: %w", msg.MessageType(), err)
			}
		}
	}
}

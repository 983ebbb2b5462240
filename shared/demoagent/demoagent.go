// Package demoagent is the logic of paddock-demo-agent: a small, deterministic,
// offline agent for demos and tests.
//
// Every prompt is a turn, counted from 1 across resumes. Its replies, each
// streamed in several chunks:
//   - "remember WORD…" → "ok, remembering WORD…";
//   - "recall" → "you asked me to remember: W1, W2, …" (every word remembered in
//     this conversation, across resumes), or "nothing to recall";
//   - "sleep N" → waits N seconds (a long turn, for cancel and failover tests),
//     then "slept N";
//   - "stream N" → N chunks "chunk 1 of N\n" … "chunk N of N\n", each its own
//     update (a line of its own in the terminal mode), then "streamed N": a
//     long streamed reply, for load tests (1 ≤ N ≤ MaxStream); when its
//     turn ends, WORKSPACE/.paddock-demo/stream-times.json holds when each
//     chunk was handed to the protocol (StreamTimes), so a load test can
//     measure from each chunk's emission;
//   - "stream N every MS" → the same reply at a real agent's pace, on a
//     fixed schedule: chunk i (from 0) is due MS milliseconds × i after
//     the turn began and the closing line MS after the last chunk
//     (1 ≤ MS ≤ MaxStreamEvery). An agent that falls behind (its output
//     not read, its CPU taken) does not sleep until it has caught up, so
//     the load it offers is exactly N chunks per N×MS whatever happens in
//     between; StreamTimes then also holds the start and the interval,
//     from which each chunk's due time follows;
//   - "work FILE" (ACP mode; "/work FILE" too) → the work of a coding agent
//     on FILE, relative to the session's cwd: a plan, a thought, tool calls
//     that read FILE and append EditedLine(K) to it through the client's
//     fs methods (the edit carrying its diff), and a permission request to
//     run "wc -l FILE" in a client terminal; the reply's last line names
//     the outcome, e.g. "work done: FILE edited; command allowed
//     (allow_once)" (see work.go);
//   - anything else → "turn K: TEXT", K being the prompt's turn number.
//
// In ACP mode every session/new and session/load advertises the commands
// "recall" and "work" (available_commands_update) and offers the modes
// "default" and "plan" (session/set_mode, answered with a
// current_mode_update; in "plan" a work turn only reads). session/load
// replays the history: text, plans, and each tool call in its last state
// under its id.
//
// --no-resume makes it advertise no loadSession (and refuse --resume).
//
// It speaks ACP on stdio (ServeACP) or, for the pty protocol, runs as a
// line-oriented terminal program (ServeTTY). Conversations are kept in the
// workspace under WORKSPACE/.paddock-demo/ID.json, so a resumed conversation
// remembers what it was told and keeps counting turns.
//
// TTY convention (what agentctl's pty protocol parses):
//   - a banner line "paddock-demo-agent: session ID (new|resumed) turn N"
//   - the input prompt "demo> " (at the start of a line, nothing after it) means
//     the agent waits for input: the previous turn has ended;
//   - a reply is one line starting with "agent: "; its text is written in
//     several chunks before the terminating newline;
//     a reply of several lines (stream N) is one such line per line;
//   - a turn interrupted by Ctrl-C (SIGINT) prints "[turn cancelled]" and a new prompt.
//
// This package must not import agentctl or anything under supervisor/.
package demoagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// StoreDir is the workspace-relative directory holding conversations.
const StoreDir = ".paddock-demo"

// StreamTimesFile is the StoreDir file holding the StreamTimes of the
// latest "stream N" turn.
const StreamTimesFile = "stream-times.json"

// StreamTimes records when a "stream N" turn emitted each of its chunks.
type StreamTimes struct {
	// Chunks is the N of "stream N".
	Chunks int `json:"chunks"`
	// EmittedUnixNano holds, for each chunk sent (the N numbered ones,
	// then the closing line), the moment it was handed to the protocol.
	EmittedUnixNano []int64 `json:"emitted_unix_nano"`
	// StartUnixNano and IntervalNano are set by a paced turn ("stream N
	// every MS"): chunk i (from 0) was due at StartUnixNano + i ×
	// IntervalNano.
	StartUnixNano int64 `json:"start_unix_nano,omitempty"`
	IntervalNano  int64 `json:"interval_nano,omitempty"`
}

// Due is when chunk i (from 0) of a paced turn was due (zero for an
// unpaced one).
func (st StreamTimes) Due(i int) time.Time {
	if st.IntervalNano <= 0 {
		return time.Time{}
	}
	return time.Unix(0, st.StartUnixNano+int64(i)*st.IntervalNano)
}

// ReadStreamTimes decodes a StreamTimesFile.
func ReadStreamTimes(b []byte) (StreamTimes, error) {
	var st StreamTimes
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode %s: %w", StreamTimesFile, err)
	}
	return st, nil
}

// MaxStream is the largest N "stream N" accepts.
const MaxStream = 100000

// MaxStreamEvery is the largest MS "stream N every MS" accepts.
const MaxStreamEvery = 60000

// Conversation is the persisted state of one demo conversation.
type Conversation struct {
	SessionID  string   `json:"session_id"`
	Turns      int      `json:"turns"`
	Remembered []string `json:"remembered"`
	History    []Entry  `json:"history"`
}

// Entry is one message of a conversation's history: text (user, agent,
// thought), a plan, or a tool call in its last state. session/load replays
// each as the session/update that reports it.
type Entry struct {
	Role     string                     `json:"role"` // user | agent | thought | plan | tool
	Text     string                     `json:"text"`
	Plan     []acp.PlanEntry            `json:"plan,omitempty"`      // role plan
	ToolCall *acp.SessionUpdateToolCall `json:"tool_call,omitempty"` // role tool
}

// Update is the session/update that replays the entry.
func (e Entry) Update() acp.SessionUpdate {
	switch e.Role {
	case "user":
		return acp.UpdateUserMessageText(e.Text)
	case "thought":
		return acp.UpdateAgentThoughtText(e.Text)
	case "plan":
		return acp.UpdatePlan(e.Plan...)
	case "tool":
		if e.ToolCall != nil {
			return acp.SessionUpdate{ToolCall: e.ToolCall}
		}
	}
	return acp.UpdateAgentMessageText(e.Text)
}

// ErrNoConversation is returned when resuming an unknown session id.
var ErrNoConversation = errors.New("no such conversation")

// Config controls the agent's behaviour.
type Config struct {
	// Workspace is where conversations are stored (default: the current directory).
	Workspace string
	// NoResume makes the agent advertise no loadSession and refuse --resume.
	NoResume bool
	// ChunkDelay is the pause between streamed chunks (default 10ms).
	ChunkDelay time.Duration
	// Model is the model the ACP agent reports for its sessions (DefaultModel
	// when empty).
	Model string

	// cancelGrace replaces permissionCancelGrace when set (tests).
	cancelGrace time.Duration
}

// DefaultModel is the model name the demo agent reports.
const DefaultModel = "demo-1"

func (c Config) model() string {
	if c.Model == "" {
		return DefaultModel
	}
	return c.Model
}

func (c Config) chunkDelay() time.Duration {
	if c.ChunkDelay <= 0 {
		return 10 * time.Millisecond
	}
	return c.ChunkDelay
}

func validID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' || id[0] == '-' {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') {
			return false
		}
	}
	return true
}

// NewID returns a fresh conversation id.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "demo-" + hex.EncodeToString(b[:])
}

func convPath(workspace, id string) string {
	return filepath.Join(workspace, StoreDir, id+".json")
}

// Load reads a conversation from the workspace.
func Load(workspace, id string) (*Conversation, error) {
	if !validID(id) {
		return nil, fmt.Errorf("invalid session id %q", id)
	}
	b, err := os.ReadFile(convPath(workspace, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("session %s: %w", id, ErrNoConversation)
	}
	if err != nil {
		return nil, fmt.Errorf("read conversation %s: %w", id, err)
	}
	var c Conversation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode conversation %s: %w", id, err)
	}
	return &c, nil
}

// Save writes a conversation atomically.
func (c *Conversation) Save(workspace string) error {
	dir := filepath.Join(workspace, StoreDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	p := convPath(workspace, c.SessionID)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write conversation: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write conversation: %w", err)
	}
	return nil
}

// Open creates (resume=false) or loads (resume=true) a conversation.
func Open(workspace, id string, resume bool) (*Conversation, error) {
	if !validID(id) {
		return nil, fmt.Errorf("invalid session id %q", id)
	}
	if resume {
		return Load(workspace, id)
	}
	if c, err := Load(workspace, id); err == nil {
		return c, nil // a new session with a known id continues it
	}
	c := &Conversation{SessionID: id, Remembered: []string{}, History: []Entry{}}
	return c, c.Save(workspace)
}

// Turn runs one prompt: it computes the reply, streams it through emit in
// several chunks, and records the turn. A cancelled ctx ends the turn early
// with ctx.Err(); the turn still counts and the conversation is saved.
func (c *Conversation) Turn(ctx context.Context, cfg Config, text string, emit func(chunk string) error) error {
	c.Turns++
	turn := c.Turns
	c.History = append(c.History, Entry{Role: "user", Text: text})
	chunks, wait, remember := reply(text, turn, c.Remembered)
	c.Remembered = append(c.Remembered, remember...)
	var err error
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-t.C:
		}
		t.Stop()
	}
	// A reply of many chunks is built once, not copied again with each.
	var sent strings.Builder
	var times *StreamTimes
	n, every, isStream := parseStream(text)
	start := time.Now()
	if isStream {
		times = &StreamTimes{Chunks: n, EmittedUnixNano: make([]int64, 0, len(chunks))}
		if every > 0 {
			times.StartUnixNano, times.IntervalNano = start.UnixNano(), int64(every)
		}
	}
	if err == nil {
		for i, ch := range chunks {
			// Paced: chunk i is due at start + i×every, and a chunk already
			// due goes out at once (no pause after a late one), so the
			// schedule, not the previous chunk, sets the pace. Unpaced:
			// the chunk delay after each chunk.
			if every > 0 && i > 0 {
				pause(ctx, time.Until(start.Add(time.Duration(i)*every)))
			}
			if err = ctx.Err(); err != nil {
				break
			}
			at := time.Now()
			if err = emit(ch); err != nil {
				break
			}
			if times != nil {
				times.EmittedUnixNano = append(times.EmittedUnixNano, at.UnixNano())
			}
			sent.WriteString(ch)
			if every == 0 {
				pause(ctx, cfg.chunkDelay())
			}
		}
	}
	if sent.Len() > 0 {
		c.History = append(c.History, Entry{Role: "agent", Text: sent.String()})
	}
	if serr := c.Save(cfg.Workspace); serr != nil && err == nil {
		err = serr
	}
	if times != nil {
		if serr := saveStreamTimes(cfg.Workspace, *times); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// pause waits d (nothing when d ≤ 0) or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
}

// parseStream reads a "stream N" prompt (every 0) or a "stream N every
// MS" one (every MS milliseconds).
func parseStream(text string) (n int, every time.Duration, ok bool) {
	f := strings.Fields(text)
	if len(f) != 2 && (len(f) != 4 || f[2] != "every") || f[0] != "stream" {
		return 0, 0, false
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 || n > MaxStream {
		return 0, 0, false
	}
	if len(f) == 4 {
		ms, err := strconv.Atoi(f[3])
		if err != nil || ms < 1 || ms > MaxStreamEvery {
			return 0, 0, false
		}
		every = time.Duration(ms) * time.Millisecond
	}
	return n, every, true
}

// saveStreamTimes writes a stream turn's StreamTimes atomically.
func saveStreamTimes(workspace string, st StreamTimes) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	p := filepath.Join(workspace, StoreDir, StreamTimesFile)
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", StreamTimesFile, err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return fmt.Errorf("write %s: %w", StreamTimesFile, err)
	}
	return nil
}

// reply computes the deterministic answer to text, already cut into the
// chunks it is streamed in.
func reply(text string, turn int, remembered []string) (chunks []string, wait time.Duration, remember []string) {
	f := strings.Fields(text)
	switch {
	case len(f) >= 2 && f[0] == "remember":
		return Chunks("ok, remembering " + strings.Join(f[1:], " ")), 0, f[1:]
	case len(f) == 1 && f[0] == "recall":
		if len(remembered) == 0 {
			return Chunks("nothing to recall"), 0, nil
		}
		return Chunks("you asked me to remember: " + strings.Join(remembered, ", ")), 0, nil
	case len(f) == 2 && f[0] == "sleep":
		if n, err := strconv.ParseFloat(f[1], 64); err == nil && n >= 0 && n <= 86400 {
			return Chunks("slept " + f[1]), time.Duration(n * float64(time.Second)), nil
		}
	case len(f) >= 2 && f[0] == "stream":
		if n, _, ok := parseStream(text); ok {
			return StreamChunks(n), 0, nil
		}
	}
	return Chunks(fmt.Sprintf("turn %d: %s", turn, text)), 0, nil
}

// StreamChunks is the reply to "stream n": n numbered lines, each a chunk of
// its own, then "streamed n".
func StreamChunks(n int) []string {
	out := make([]string, 0, n+1)
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("chunk %d of %d\n", i, n))
	}
	return append(out, fmt.Sprintf("streamed %d", n))
}

// Chunks splits a reply into at least two (when possible) to at most four pieces
// on word boundaries; concatenated they give back s.
func Chunks(s string) []string {
	words := strings.SplitAfter(s, " ")
	if len(words) < 2 {
		if len(s) >= 2 {
			return []string{s[:len(s)/2], s[len(s)/2:]}
		}
		return []string{s}
	}
	n := 4
	if len(words) < n {
		n = len(words)
	}
	per := (len(words) + n - 1) / n
	var out []string
	for i := 0; i < len(words); i += per {
		j := i + per
		if j > len(words) {
			j = len(words)
		}
		out = append(out, strings.Join(words[i:j], ""))
	}
	return out
}

package term

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/testkit"
)

// emu is a real VT emulator (charmbracelet/x/vt) that counts the bytes it answers with,
// i.e. the junk a replayed query would type into the shell.
type emu struct {
	e         *vt.Emulator
	mu        sync.Mutex
	responses []byte
	done      chan struct{}
}

func newEmu(cols, rows int) *emu {
	m := &emu{e: vt.NewEmulator(cols, rows), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		buf := make([]byte, 1024)
		for {
			n, err := m.e.Read(buf)
			m.mu.Lock()
			m.responses = append(m.responses, buf[:n]...)
			m.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return m
}

func (m *emu) write(b []byte) { _, _ = m.e.Write(b) }

// finish stops the emulator and returns what it answered.
func (m *emu) finish() []byte {
	_ = m.e.Close()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.responses
}

// diffScreens returns "" when both screens hold the same cells (content and style).
func diffScreens(a, b *emu) string {
	w, h := a.e.Width(), a.e.Height()
	for y := range h {
		for x := range w {
			ca, cb := a.e.CellAt(x, y), b.e.CellAt(x, y)
			if (ca == nil) != (cb == nil) || (ca != nil && !ca.Equal(cb)) {
				return "first difference at row " + itoa(y) + " col " + itoa(x) +
					"\n--- replayed screen:\n" + a.e.String() + "\n--- full-stream screen:\n" + b.e.String()
			}
		}
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }

func hasFFFD(m *emu) bool {
	for y := range m.e.Height() {
		for x := range m.e.Width() {
			if c := m.e.CellAt(x, y); c != nil && strings.ContainsRune(c.Content, '\uFFFD') {
				return true
			}
		}
	}
	return false
}

type recording struct {
	name    string
	stream  []byte
	minRing int // the ring must hold at least this much for the screen to be reproducible
	queries bool
	skip    string // why this case cannot run here
}

// vimRecording is a recording of recordVim kept in testdata, so the full-screen
// case runs on every machine; regenerate it with
//
//	go test ./shared/term -run TestReplayScreenEqualsFullStream -record-vim
const vimRecording = "testdata/vim-session.pty"

var recordVimFlag = flag.Bool("record-vim", false, "rewrite "+vimRecording+" from this machine's vim")

// findVim returns a vim on PATH (vim, vim.tiny or a vi that is vim), or why
// there is none.
func findVim() (string, string) {
	for _, name := range []string{"vim", "vim.basic", "vim.tiny", "vi"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err == nil && strings.HasPrefix(filepath.Base(real), "vim") {
			return p, ""
		}
	}
	return "", "no vim on PATH (vim, vim.basic, vim.tiny, or vi linked to vim); install vim-tiny"
}

// recordVim runs vim in a real PTY, types into it and returns everything it printed.
func recordVim(t *testing.T, vim string) []byte {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte(strings.Repeat("existing line with ümlauts and 漢字\n", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{vim, "-u", "NONE", "-i", "NONE", "-N", "-n", file}
	term, err := NewTerminal(TerminalConfig{Argv: args, Dir: dir, Env: []string{"TERM=xterm-256color", "HOME=" + dir, "LANG=C.UTF-8", "PATH=" + os.Getenv("PATH")}, Cols: 80, Rows: 24, ReplayBytes: 4 << 20})
	if err != nil {
		t.Fatalf("start vim: %v", err)
	}
	defer term.Close()
	ring := term.Ring()
	contains := func(s string) func() bool {
		return func() bool {
			buf := make([]byte, ring.Next())
			n, _ := ring.ReadAt(buf, 0)
			return bytes.Contains(buf[:n], []byte(s))
		}
	}
	testkit.WaitFor(t, 10*time.Second, "vim shows the file", testkit.Cond(contains("existing line")))
	waitQuiet(t, ring)
	_, _ = term.Write([]byte("ggOtyped in vim: 世界 🎉 done\x1b"))
	testkit.WaitFor(t, 10*time.Second, "vim shows the typed text", testkit.Cond(contains("done")))
	waitQuiet(t, ring)
	_, _ = term.Write([]byte("10Gdd:set number\r"))
	waitQuiet(t, ring)
	buf := make([]byte, ring.Next())
	n, _ := ring.ReadAt(buf, 0)
	return buf[:n]
}

// checkFullScreen fails unless a vim recording is a full-screen session that
// asks the terminal things: the alternate screen, a scroll region, and a DA2
// or cursor-position query.
func checkFullScreen(t *testing.T, name string, v []byte) {
	t.Helper()
	for _, want := range []string{"\x1b[?1049h", "typed in vim", "done"} {
		if !bytes.Contains(v, []byte(want)) {
			t.Fatalf("%s: the recording (%d bytes) lacks %q: not a vim session", name, len(v), want)
		}
	}
	if !bytes.Contains(v, []byte("\x1b[>c")) && !bytes.Contains(v, []byte("\x1b[6n")) {
		t.Fatalf("%s: the recording asks the terminal nothing (no DA2, no DSR)", name)
	}
}

// waitQuiet waits until the ring has not grown for 300 ms (the program is idle).
func waitQuiet(t *testing.T, r *Ring) {
	t.Helper()
	last, since := r.Next(), time.Now()
	testkit.WaitFor(t, 10*time.Second, "output to settle", testkit.Cond(func() bool {
		if n := r.Next(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 300*time.Millisecond
	}))
}

// TestReplayScreenEqualsFullStream feeds recorded streams through rings of random sizes
// at random chunk sizes (so the window starts at random cut points), and checks with a
// real terminal emulator that RIS + the full replay gives the same screen as the whole
// stream, with no U+FFFD and no query answered; and that a client holding a prefix plus
// a delta replay gets the same screen too.
func TestReplayScreenEqualsFullStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const cols, rows = 80, 24
	recs := []recording{
		{"colours", colourStream(rng, 3000), 16 << 10, true, ""},
		{"cjk-emoji", cjkStream(rng, 2500), 16 << 10, true, ""},
		{"status-line", statusStream(rng, 3000), 16 << 10, true, ""},
		{"full-screen-redraw", redrawStream(rng, 120, cols, rows), 8 << 10, true, ""},
	}
	// vim: a real full-screen program (alternate screen, scroll regions, DA2
	// and DSR queries) after ordinary output. The recording kept in testdata
	// runs everywhere; the live one runs this machine's vim, and skips (loudly)
	// only when there is none, except on CI, which installs vim-tiny.
	var live []byte
	vim, missing := findVim()
	switch {
	case vim != "":
		live = recordVim(t, vim)
		if *recordVimFlag {
			if err := os.WriteFile(vimRecording, live, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	case os.Getenv("CI") != "":
		t.Fatalf("%s: CI must run the live vim case (.ci/run installs vim-tiny)", missing)
	case *recordVimFlag:
		t.Fatalf("-record-vim: %s", missing)
	}
	recorded, err := os.ReadFile(vimRecording)
	if err != nil {
		t.Fatalf("read %s: %v", vimRecording, err)
	}
	for _, v := range []struct {
		name string
		rec  []byte
	}{{"vim-recorded", recorded}, {"vim-live", live}} {
		if v.rec == nil {
			recs = append(recs, recording{name: v.name, skip: "SKIPPED: " + missing})
			continue
		}
		checkFullScreen(t, v.name, v.rec)
		// The colour prefix holds queries too.
		recs = append(recs, recording{v.name, append(colourStream(rng, 2000), v.rec...), len(v.rec) + 1024, true, ""})
	}
	for _, rec := range recs {
		t.Run(rec.name, func(t *testing.T) {
			if rec.skip != "" {
				t.Skip(rec.skip)
			}
			full := newEmu(cols, rows)
			full.write(rec.stream)
			fullAnswers := full.finish()
			if rec.queries && len(fullAnswers) == 0 {
				t.Fatalf("the stream should contain queries the emulator answers")
			}
			if hasFFFD(full) {
				t.Fatalf("the full stream itself shows U+FFFD")
			}
			ground := groundAt(rec.stream)
			for trial := range 12 {
				size := rec.minRing + rng.IntN(max(1, min(256<<10, len(rec.stream))-rec.minRing))
				r := NewRing(size)
				writeChunks(rng, r, rec.stream, 1+rng.IntN(16<<10))
				frames, kind, end := r.Replay(-1)
				if kind != termproto.ReplayFull || end != int64(len(rec.stream)) {
					t.Fatalf("trial %d: kind %v end %d", trial, kind, end)
				}
				if len(frames) > 0 && !ground[frames[0].Offset] {
					t.Fatalf("trial %d: replay starts at %d, inside a sequence or character", trial, frames[0].Offset)
				}
				replayed := newEmu(cols, rows)
				replayed.write(ResetSequence)
				replayed.write(concat(frames))
				if answers := replayed.finish(); len(answers) > 0 {
					t.Fatalf("trial %d (ring %d): the replay made the terminal answer %q", trial, size, answers)
				}
				if d := diffScreens(replayed, full); d != "" {
					t.Fatalf("trial %d (ring %d, oldest %d, start %d): %s", trial, size, r.Oldest(), frames[0].Offset, d)
				}
				if hasFFFD(replayed) {
					t.Fatalf("trial %d: U+FFFD on the replayed screen", trial)
				}

				// Delta: the client saw the stream up to a line end, then reconnects.
				k := r.Oldest() + rng.Int64N(end-r.Oldest()+1)
				for k < end && (k == 0 || rec.stream[k-1] != '\n' || !ground[k]) {
					k++
				}
				dframes, dkind, _ := r.Replay(k)
				if k == end && dkind != termproto.ReplayNone || k < end && dkind != termproto.ReplayDelta {
					t.Fatalf("trial %d: replay from %d: kind %v", trial, k, dkind)
				}
				delta := newEmu(cols, rows)
				delta.write(rec.stream[:k])
				delta.write(concat(dframes))
				delta.finish()
				if d := diffScreens(delta, full); d != "" {
					t.Fatalf("trial %d: delta from %d: %s", trial, k, d)
				}
			}
		})
	}
}

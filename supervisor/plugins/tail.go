package plugins

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// tailWriter passes a plugin's raw stderr on to its log file and keeps the
// last few lines, so that a plugin refused at load (it exited at start, or
// printed why it is not a plugin) is reported with what it said.
type tailWriter struct {
	out io.Writer // the per-plugin log file; may be nil

	mu    sync.Mutex
	cur   []byte
	lines []string
}

const (
	tailLines   = 3
	tailLineMax = 300
)

func (w *tailWriter) Write(p []byte) (int, error) {
	if w.out != nil {
		_, _ = w.out.Write(p) // a full disk must not stop the plugin's log pipe
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.cur) < tailLineMax {
				w.cur = append(w.cur, p[:min(len(p), tailLineMax-len(w.cur))]...)
			}
			break
		}
		if len(w.cur) < tailLineMax {
			w.cur = append(w.cur, p[:min(i, tailLineMax-len(w.cur))]...)
		}
		if line := readable(string(w.cur)); line != "" {
			w.lines = append(w.lines, line)
			if len(w.lines) > tailLines {
				w.lines = w.lines[1:]
			}
		}
		w.cur = w.cur[:0]
		p = p[i+1:]
	}
	return len(p), nil
}

// tail returns the last lines written, joined with " | ".
func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	if s := readable(string(w.cur)); s != "" {
		lines = append(lines[:len(lines):len(lines)], s)
	}
	return strings.Join(lines, " | ")
}

// readable turns an hclog JSON line into "level: message"; other lines are
// returned trimmed.
func readable(line string) string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") {
		return line
	}
	var entry struct {
		Level   string `json:"@level"`
		Message string `json:"@message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal([]byte(line), &entry) != nil || entry.Message == "" {
		return line
	}
	out := entry.Level + ": " + entry.Message
	if entry.Error != "" {
		out += ": " + entry.Error
	}
	return out
}

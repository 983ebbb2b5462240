package monitor

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// DefaultBuffer is how many log lines a stream holds for a slow reader
// before it drops new ones.
const DefaultBuffer = 512

// Sinks is where streams attach: the server's root hclog.InterceptLogger.
type Sinks interface {
	RegisterSink(sink hclog.SinkAdapter)
	DeregisterSink(sink hclog.SinkAdapter)
}

// Options configure one stream.
type Options struct {
	// Level is the most verbose level streamed (default info).
	Level hclog.Level
	// JSON streams JSON lines instead of hclog's text lines.
	JSON bool
	// Buffer is the number of lines held for the reader (default DefaultBuffer).
	Buffer int
}

// Stream is one attached log stream. Read lines from Lines until Close.
type Stream struct {
	sinks   Sinks
	sink    hclog.SinkAdapter
	lines   chan []byte
	dropped atomic.Uint64
	once    sync.Once
}

// Open attaches a stream to sinks at the given level.
func Open(sinks Sinks, o Options) *Stream {
	if o.Level == hclog.NoLevel {
		o.Level = hclog.Info
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	s := &Stream{sinks: sinks, lines: make(chan []byte, o.Buffer)}
	s.sink = hclog.NewSinkAdapter(&hclog.LoggerOptions{
		Level:       o.Level,
		JSONFormat:  o.JSON,
		Output:      lineWriter{s},
		DisableTime: false,
	})
	sinks.RegisterSink(s.sink)
	return s
}

// Lines delivers formatted log lines (each ending in a newline).
func (s *Stream) Lines() <-chan []byte { return s.lines }

// Dropped is how many lines were dropped because the reader fell behind.
func (s *Stream) Dropped() uint64 { return s.dropped.Load() }

// Close detaches the stream. Lines is not closed (a logger may be writing).
func (s *Stream) Close() {
	s.once.Do(func() { s.sinks.DeregisterSink(s.sink) })
}

// lineWriter receives the sink adapter's formatted lines; it never blocks.
type lineWriter struct{ s *Stream }

func (w lineWriter) Write(p []byte) (int, error) {
	line := bytes.Clone(p)
	select {
	case w.s.lines <- line:
	default:
		w.s.dropped.Add(1)
	}
	return len(p), nil
}

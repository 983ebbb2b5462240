package term

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
	"github.com/paddockhq/paddock/api/termproto"
)

// benchFile writes a file of PADDOCK_BENCH_BYTES (default 16 MiB) printable lines.
func benchFile(b *testing.B) (string, int64) {
	b.Helper()
	size := int64(16 << 20)
	if s := os.Getenv("PADDOCK_BENCH_BYTES"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			size = n
		}
	}
	line := []byte("0123456789abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789\n")
	buf := make([]byte, 0, size)
	for int64(len(buf)) < size {
		buf = append(buf, line...)
	}
	path := filepath.Join(b.TempDir(), "big.txt")
	if err := os.WriteFile(path, buf[:size], 0o644); err != nil {
		b.Fatal(err)
	}
	return path, size
}

// BenchmarkPTYDirect is the baseline: cat a file through a PTY read in 32 KiB chunks.
func BenchmarkPTYDirect(b *testing.B) {
	path, size := benchFile(b)
	buf := make([]byte, ReadBufferBytes)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command("cat", path)
		ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		for {
			n, err := ptmx.Read(buf)
			got += int64(n)
			if err != nil {
				break
			}
		}
		_ = cmd.Wait()
		_ = ptmx.Close()
		if got < size {
			b.Fatalf("read %d of %d bytes", got, size)
		}
	}
}

// BenchmarkPTYWebSocket is the same cat through Terminal, Ring, Manager and a WebSocket
// client on loopback (each iteration is a reset that starts a fresh cat).
func BenchmarkPTYWebSocket(b *testing.B) {
	path, size := benchFile(b)
	_, srv := newTestServer(b, Options{Shell: []string{"cat", path}, ReplayBytes: 256 << 10})
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}, ReadBufferSize: 64 << 10}
	ws, _, err := d.Dial(wsURL(srv, "bench"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	hello, _ := termproto.EncodeMessage(termproto.Hello{Cols: 80, Rows: 24})
	_ = ws.WriteMessage(websocket.TextMessage, hello)
	// readUntilExited counts stream bytes until the exited message.
	readUntilExited := func() int64 {
		var got int64
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if typ == websocket.BinaryMessage {
				if len(data) > 9 && data[0] == termproto.FrameOutput {
					got += int64(len(data) - 9)
				}
				continue
			}
			m, err := termproto.DecodeServerMessage(data)
			if err != nil {
				b.Fatal(err)
			}
			if m.MessageType() == "exited" {
				return got
			}
		}
	}
	readUntilExited()
	reset, _ := termproto.EncodeMessage(termproto.Reset{})
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		_ = ws.WriteMessage(websocket.TextMessage, reset)
		if got := readUntilExited(); got < size {
			b.Fatalf("received %d of %d bytes", got, size)
		}
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkEchoDirect measures keystroke echo through a bare PTY (the tty echoes input).
func BenchmarkEchoDirect(b *testing.B) {
	cmd := exec.Command("cat")
	ptmx, err := pty.Start(cmd)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = ptmx.Close() }()
	buf := make([]byte, 1024)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := ptmx.Write([]byte("x")); err != nil {
			b.Fatal(err)
		}
		if _, err := ptmx.Read(buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

// BenchmarkEchoWebSocket measures keystroke echo through the whole terminal path.
func BenchmarkEchoWebSocket(b *testing.B) {
	_, srv := newTestServer(b, Options{Shell: []string{"cat"}})
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}}
	ws, _, err := d.Dial(wsURL(srv, "echo"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	hello, _ := termproto.EncodeMessage(termproto.Hello{Cols: 80, Rows: 24})
	_ = ws.WriteMessage(websocket.TextMessage, hello)
	if _, _, err := ws.ReadMessage(); err != nil { // attached
		b.Fatal(err)
	}
	key := termproto.EncodeInput([]byte("x"))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := ws.WriteMessage(websocket.BinaryMessage, key); err != nil {
			b.Fatal(err)
		}
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				b.Fatal(errors.Join(errors.New("read echo"), err))
			}
			if typ == websocket.BinaryMessage && len(data) > 9 && data[0] == termproto.FrameOutput {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

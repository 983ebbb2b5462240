package acpagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// countingReader counts the reads that returned data.
type countingReader struct {
	io.ReadCloser
	mu    sync.Mutex
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.reads++
		c.mu.Unlock()
	}
	return n, err
}

// agentPipe is an agent's stdout as spawn makes it: a blocking pipe, read
// at once when it has something (readNow), else after wait.
func agentPipe(t *testing.T) (r, w *os.File, wait func() error, readNow func([]byte) (int, bool, error)) {
	t.Helper()
	r, w, err := blockingPipe()
	if err != nil {
		t.Fatal(err)
	}
	end, endW, err := blockingPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endW.Close(); end.Close() })
	readNow, err = quietRead(r)
	if err != nil {
		t.Fatal(err)
	}
	return r, w, func() error { return waitReadable(r, end) }, readNow
}

// A streaming agent's lines, one every 10 ms, are read several at a time
// (each read of the pipe is a wakeup of agentctl), all of them in order;
// lines that are not JSON-RPC are reported and left out, and a last line
// without its newline still counts.
func TestAgentOutputReadsAStreamInBatches(t *testing.T) {
	pr, pw, wait, readNow := agentPipe(t) // a kernel pipe, buffered as an agent's stdout is
	src := &countingReader{ReadCloser: pr}
	var garbage []string
	// Reads that found the pipe readable without waiting count as reads
	// too.
	counted := func(p []byte) (int, bool, error) {
		n, ok, err := readNow(p)
		if n > 0 {
			src.mu.Lock()
			src.reads++
			src.mu.Unlock()
		}
		return n, ok, err
	}
	out := &agentOutput{src: src, wait: wait, readNow: counted, garbage: func(line string) { garbage = append(garbage, line) }}
	const n = 100
	go func() {
		for i := 1; i <= n; i++ {
			fmt.Fprintf(pw, "{\"n\":%d}\n", i)
			if i == 10 {
				fmt.Fprint(pw, "Welcome to my agent!\n  \n")
			}
			time.Sleep(10 * time.Millisecond) // the agent's pace: the workload, not a wait
		}
		fmt.Fprint(pw, `{"n":"last"}`)
		pw.Close()
	}()
	sc := bufio.NewScanner(out)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != n+1 || got[0] != `{"n":1}` || got[n-1] != fmt.Sprintf(`{"n":%d}`, n) || got[n] != `{"n":"last"}` {
		t.Fatalf("read %d lines: %s", len(got), strings.Join(got, " "))
	}
	for i := 1; i <= n; i++ {
		if got[i-1] != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("line %d is %s", i, got[i-1])
		}
	}
	if len(garbage) != 1 || garbage[0] != "Welcome to my agent!" {
		t.Fatalf("reported %q", garbage)
	}
	// 1 s of lines at a pace growing to outputPace by 0.4 s is ~20 reads;
	// one per line would be 100 or more.
	t.Logf("%d reads for %d lines", src.reads, n)
	if src.reads > n/3 {
		t.Fatalf("%d reads for %d lines 10 ms apart: not batched", src.reads, n)
	}
}

// A line after a quiet spell is read at once, not after a pause.
func TestAgentOutputReadsALoneLineAtOnce(t *testing.T) {
	pr, pw, wait, readNow := agentPipe(t)
	out := &agentOutput{src: pr, wait: wait, readNow: readNow, garbage: func(string) {}}
	sc := bufio.NewScanner(out)
	for i := 0; i < 3; i++ {
		sent := time.Now()
		go fmt.Fprintf(pw, "{\"n\":%d}\n", i)
		if !sc.Scan() {
			t.Fatal(sc.Err())
		}
		if d := time.Since(sent); d >= outputPace {
			t.Fatalf("line %d took %s to be read", i, d)
		}
		// A quiet spell longer than the pace before the next line.
		time.Sleep(outputPace + 10*time.Millisecond) // the workload's pause, not a wait
	}
	pw.Close()
}

// The pause between reads of a burst of output is a quarter of the
// burst's age, from firstPace up to outputPace.
func TestThePaceGrowsWithTheBurst(t *testing.T) {
	for _, c := range []struct{ age, want time.Duration }{
		{0, firstPace}, {4 * firstPace, firstPace}, {200 * time.Millisecond, 50 * time.Millisecond},
		{4 * outputPace, outputPace}, {time.Hour, outputPace},
	} {
		if got := burstPace(c.age); got != c.want {
			t.Errorf("burstPace(%s) = %s, want %s", c.age, got, c.want)
		}
	}
}

// A reply of a few lines written within a few milliseconds after a quiet
// spell is read whole well within outputPace: the pace after a quiet spell
// starts short.
func TestAgentOutputReadsAShortBurstSoon(t *testing.T) {
	readBursts(t, 3, false, 2*outputPace) // a quiet spell between bursts
}

// Turns that follow each other at once are each read soon: a burst that
// ends with a JSON-RPC response (a turn's end) starts the pace over, so
// the next burst, written right after it, is not held for a whole pace.
func TestAgentOutputReadsBackToBackTurnsSoon(t *testing.T) {
	readBursts(t, 5, true, 0)
}

// readBursts has an agent write rounds bursts of three lines 5 ms apart,
// each ended by a turn's end (a JSON-RPC response) when turnEnd is set and
// followed by quiet, and fails when a burst takes outputPace or longer
// to be read whole.
func readBursts(t *testing.T, rounds int, turnEnd bool, quiet time.Duration) {
	pr, pw, wait, readNow := agentPipe(t)
	out := &agentOutput{src: pr, wait: wait, readNow: readNow, garbage: func(string) {}}
	sc := bufio.NewScanner(out)
	lines := 3
	if turnEnd {
		lines++
	}
	for round := 0; round < rounds; round++ {
		sent := time.Now()
		go func() {
			for i := 0; i < 3; i++ {
				fmt.Fprintf(pw, "{\"n\":%d}\n", i)
				time.Sleep(5 * time.Millisecond) // the agent's pace, not a wait
			}
			if turnEnd {
				fmt.Fprintf(pw, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"stopReason\":\"end_turn\"}}\n", round)
			}
		}()
		for i := 0; i < lines; i++ {
			if !sc.Scan() {
				t.Fatal(sc.Err())
			}
		}
		if d := time.Since(sent); d >= outputPace {
			t.Fatalf("round %d: %d lines over 10 ms took %s to be read (the pace is %s)", round, lines, d, outputPace)
		}
		time.Sleep(quiet) // the workload's pause between bursts, not a wait
	}
	pw.Close()
}

// The fast path of session/update notifications reports what the SDK's
// decoding and SessionUpdate report, for every kind of update an agent may
// send; whatever is not a session/update notification goes to the SDK.
func TestUpdateLineMatchesTheSDK(t *testing.T) {
	type call struct{ kind, text string }
	var fast, sdk []call
	fastClient := &client{a: &Agent{cfg: Config{OnUpdate: func(k, s string) { fast = append(fast, call{k, s}) }}}}
	sdkClient := &client{a: &Agent{cfg: Config{OnUpdate: func(k, s string) { sdk = append(sdk, call{k, s}) }}}}
	title := "read a file"
	updates := []acp.SessionUpdate{
		acp.UpdateAgentMessageText("chunk 1 of 2\n"),
		acp.UpdateUserMessageText(`a "quoted" prompt`),
		acp.UpdateAgentThoughtText("thinking…"),
		acp.UpdateAgentMessage(acp.ImageBlock("aGVsbG8=", "image/png")),
		{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "t1", Title: title}},
		{Plan: &acp.SessionUpdatePlan{Entries: []acp.PlanEntry{}}},
	}
	for _, u := range updates {
		params := acp.SessionNotification{SessionId: "s-1", Update: u}
		p, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":` + string(p) + `}`)
		if !fastClient.updateLine(line) {
			t.Errorf("the fast path declined %s", line)
		}
		var back acp.SessionNotification
		if err := json.Unmarshal(p, &back); err != nil {
			t.Fatal(err)
		}
		if err := sdkClient.SessionUpdate(context.Background(), back); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(fast) != fmt.Sprint(sdk) || len(sdk) != 3 {
		t.Fatalf("fast path reported %v, the SDK %v", fast, sdk)
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s-1"}}`,
		`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/update","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":[1]}}}`,
		`{"jsonrpc":"2.0","method":"_vendor/session/update_like","params":{}}`,
	} {
		if fastClient.updateLine([]byte(line)) {
			t.Errorf("the fast path took %s, which is the SDK's to handle", line)
		}
	}
}

// Kill returns, and ends the reading of the agent's output, even while a
// process the agent left running (in a session of its own, out of Kill's
// reach) keeps the agent's stdout and stderr open: the blocking pipe's read
// is woken by the pipe Kill closes (a close of the read end would not wake
// it), and the wait for the agent's exit does not wait for its stderr's end
// for longer than the agent's WaitDelay.
func TestKillEndsTheOutputThatALeftoverProcessHolds(t *testing.T) {
	pidFile := t.TempDir() + "/leftover.pid"
	a, err := spawn(Config{Argv: []string{"sh", "-c", `setsid sleep 60 & echo $! > "$0"; exec sleep 60`, pidFile}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			var pid int
			fmt.Sscan(string(b), &pid)
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(pidFile); len(bytes.TrimSpace(b)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leftover process did not start")
		}
		time.Sleep(10 * time.Millisecond) // polling for the file, not a fixed wait
	}
	killed := make(chan struct{})
	go func() { a.Kill(); close(killed) }()
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill has not returned after 10 s")
	}
	select {
	case <-a.conn.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the ACP connection still reads the agent's output 5 s after Kill")
	}
}

// BenchmarkUpdateLine measures what agentctl does with one line of a
// streamed reply once read: the check that it is JSON-RPC and the fast
// path's decode of a text chunk into OnUpdate.
func BenchmarkUpdateLine(b *testing.B) {
	var got int
	c := &client{a: &Agent{cfg: Config{OnUpdate: func(kind, text string) { got += len(text) }}}}
	out := &agentOutput{update: c.updateLine, garbage: func(line string) { b.Fatalf("garbage %q", line) }}
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"4a1f7c2e-9b3d-4e8a-a6f0-2c5d8e9b1a37","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk 123 of 600\n"}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		out.take(line)
	}
	if got != b.N*len("chunk 123 of 600\n") || len(out.ready) != 0 {
		b.Fatalf("OnUpdate got %d bytes for %d lines; %d bytes went to the SDK", got, b.N, len(out.ready))
	}
}

// readNow never waits: it reports nothing on an empty pipe, the bytes
// written once there are some, and the end once no writer is left.
func TestQuietReadNeverWaits(t *testing.T) {
	r, w, _, readNow := agentPipe(t)
	defer r.Close()
	buf := make([]byte, 64)
	if n, ok, err := readNow(buf); ok || n != 0 || err != nil {
		t.Fatalf("an empty pipe read %d, %v, %v", n, ok, err)
	}
	fmt.Fprint(w, "{}\n")
	if n, ok, err := readNow(buf); !ok || err != nil || string(buf[:n]) != "{}\n" {
		t.Fatalf("read %q, %v, %v", buf[:n], ok, err)
	}
	w.Close()
	if n, ok, err := readNow(buf); !ok || n != 0 || err != io.EOF {
		t.Fatalf("at the end: %d, %v, %v", n, ok, err)
	}
}

// A line the fast path declines is still checked: one that names
// session/update and a chunk but is not JSON is reported, not passed on.
func TestABrokenChunkLineIsReported(t *testing.T) {
	var garbage []string
	c := &client{a: &Agent{cfg: Config{OnUpdate: func(kind, text string) { t.Errorf("OnUpdate(%s, %q)", kind, text) }}}}
	out := &agentOutput{update: c.updateLine, garbage: func(line string) { garbage = append(garbage, line) }}
	out.take([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`))
	out.take([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":null}}}`))
	if len(garbage) != 1 || len(out.ready) != 0 {
		t.Fatalf("reported %q, passed on %q", garbage, out.ready)
	}
}

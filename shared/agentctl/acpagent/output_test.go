package acpagent

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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

// A streaming agent's lines, one every 10 ms, are read several at a time
// (each read of the pipe is a wakeup of agentctl), all of them in order;
// lines that are not JSON-RPC are reported and left out, and a last line
// without its newline still counts.
func TestAgentOutputReadsAStreamInBatches(t *testing.T) {
	pr, pw, err := os.Pipe() // a kernel pipe, buffered as an agent's stdout is
	if err != nil {
		t.Fatal(err)
	}
	src := &countingReader{ReadCloser: pr}
	var garbage []string
	out := &agentOutput{src: src, garbage: func(line string) { garbage = append(garbage, line) }}
	const n = 40
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
	// 0.4 s of lines at one read per outputPace is ~9 reads; one per line
	// would be 40 or more.
	if src.reads > n/3 {
		t.Fatalf("%d reads for %d lines 10 ms apart: not batched", src.reads, n)
	}
}

// A line after a quiet spell is read at once, not after a pause.
func TestAgentOutputReadsALoneLineAtOnce(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &agentOutput{src: pr, garbage: func(string) {}}
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

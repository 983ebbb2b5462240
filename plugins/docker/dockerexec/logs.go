package dockerexec

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// logsTail returns the last lines of a container's output for messages.
func (r *Runtime) logsTail(cli *client.Client, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rc, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "8"})
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(ioLimit(rc, 8192))
	return strings.TrimSpace(demux(buf.Bytes()))
}

// demux strips the engine's 8-byte stream frame headers from a non-tty log.
func demux(b []byte) string {
	var out strings.Builder
	for len(b) >= 8 && (b[0] == 1 || b[0] == 2) && b[1] == 0 && b[2] == 0 && b[3] == 0 {
		n := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7])
		b = b[8:]
		if n > len(b) {
			n = len(b)
		}
		out.Write(b[:n])
		b = b[n:]
	}
	out.Write(b)
	return out.String()
}

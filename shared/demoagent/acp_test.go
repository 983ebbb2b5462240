package demoagent

import (
	"bytes"
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// A chunk's notification, written without the SDK's generic encoding, is
// the SDK's session/update notification of that chunk, one line each.
func TestChunkLineIsTheSDKsSessionUpdate(t *testing.T) {
	for _, text := range []string{"chunk 1 of 3\n", `a "quote", a \ backslash, <tag> & é 🚀`, "", "\x00\x1f\u2028"} {
		line := chunkLine(nil, "demo-0123", text)
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("%q: not one line: %q", text, line)
		}
		var got struct {
			JSONRPC string                  `json:"jsonrpc"`
			Method  string                  `json:"method"`
			ID      json.RawMessage         `json:"id"`
			Params  acp.SessionNotification `json:"params"`
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%q: %v in %s", text, err, line)
		}
		if got.JSONRPC != "2.0" || got.Method != acp.ClientMethodSessionUpdate || got.ID != nil {
			t.Fatalf("%q: envelope %+v", text, got)
		}
		want, err := json.Marshal(acp.SessionNotification{SessionId: "demo-0123", Update: acp.UpdateAgentMessageText(text)})
		if err != nil {
			t.Fatal(err)
		}
		have, err := json.Marshal(got.Params)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Fatalf("%q: decoded as %s, the SDK's is %s", text, have, want)
		}
	}
}

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// TestJSONResponsesCarryContentLength checks that JSON answers (a created
// task, a listing larger than net/http's own 2 KiB buffer, an error) are
// sent with a Content-Length matching the body and without chunked
// encoding, and that their bodies are the indented JSON of the value.
func TestJSONResponsesCarryContentLength(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	base := "http://" + c.servers[0].HTTPAddr()
	for i := 0; i < 40; i++ { // GET /v1/tasks then answers ~10 KiB
		if _, err := c.client(0).CreateTask(ctx(t), api.CreateTaskRequest{Title: fmt.Sprintf("task %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	call := func(method, path, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.TransferEncoding) != 0 {
			t.Errorf("%s %s: Transfer-Encoding %v, want none", method, path, resp.TransferEncoding)
		}
		if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(data)) {
			t.Errorf("%s %s: Content-Length %q for a body of %d bytes", method, path, got, len(data))
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", method, path, ct)
		}
		return resp, data
	}
	indented := func(v any) []byte {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}

	resp, data := call("POST", "/v1/tasks", `{"title":"one more"}`)
	var task api.Task
	if err := json.Unmarshal(data, &task); err != nil || resp.StatusCode != http.StatusCreated || task.Title != "one more" || task.State != api.TaskOpen {
		t.Fatalf("POST /v1/tasks: %s %s (%v)", resp.Status, data, err)
	}
	if want := indented(task); !bytes.Equal(data, want) {
		t.Errorf("POST /v1/tasks body is not the task's indented JSON:\n%s\nwant\n%s", data, want)
	}

	// A title encoding/json escapes takes encoding/json's path: the same form.
	resp, data = call("POST", "/v1/tasks", `{"title":"<b> \"q\" é"}`)
	task = api.Task{}
	if err := json.Unmarshal(data, &task); err != nil || resp.StatusCode != http.StatusCreated || task.Title != `<b> "q" é` {
		t.Fatalf("POST /v1/tasks: %s %s (%v)", resp.Status, data, err)
	}
	if want := indented(task); !bytes.Equal(data, want) {
		t.Errorf("POST /v1/tasks body is not the task's indented JSON:\n%s\nwant\n%s", data, want)
	}
	resp, data = call("GET", "/v1/tasks/"+task.ID, "")
	if want := indented(task); resp.StatusCode != http.StatusOK || !bytes.Equal(data, want) {
		t.Errorf("GET /v1/tasks/%s: %s\n%s\nwant\n%s", task.ID, resp.Status, data, want)
	}

	resp, data = call("GET", "/v1/tasks", "")
	var list struct {
		Tasks []api.Task `json:"tasks"`
	}
	if err := json.Unmarshal(data, &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Tasks) != 42 {
		t.Fatalf("GET /v1/tasks: %s, %d tasks (%v)", resp.Status, len(list.Tasks), err)
	}
	if len(data) < 8<<10 {
		t.Fatalf("the listing is %d bytes; the test needs one larger than net/http's buffer", len(data))
	}

	resp, data = call("POST", "/v1/tasks", `{"title":`)
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(data, []byte(`"code": "bad_request"`)) || !bytes.Contains(data, []byte("invalid JSON body")) {
		t.Errorf("bad JSON: %s %s", resp.Status, data)
	}
}

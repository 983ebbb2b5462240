package termtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api/termproto"
)

// echoServer is a scripted terminal: it answers the hello with attached (echoing the
// size in Name), echoes each input frame as output at the next stream offset, answers
// reset with reset, and closes with CloseTakenOver on input "bye". It refuses requests
// without ?ok with 401.
func echoServer(t *testing.T) string {
	t.Helper()
	up := websocket.Upgrader{Subprotocols: []string{termproto.Subprotocol}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("ok") {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		write := func(typ int, b []byte) bool { return ws.WriteMessage(typ, b) == nil }
		_, b, err := ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := termproto.DecodeClientMessage(b)
		h, ok := m.(termproto.Hello)
		if err != nil || !ok {
			return
		}
		a, _ := termproto.EncodeMessage(termproto.Attached{Name: strings.Repeat("x", h.Cols/10), Epoch: "e1", Pid: 7})
		if !write(websocket.TextMessage, a) {
			return
		}
		var off int64
		for {
			typ, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if typ == websocket.TextMessage {
				rd, _ := termproto.EncodeMessage(termproto.ResetDone{Epoch: "e2", Pid: 8})
				off = 0
				if !write(websocket.TextMessage, rd) {
					return
				}
				continue
			}
			f, err := termproto.DecodeFrame(b)
			if err != nil {
				return
			}
			if string(f.Data) == "bye" {
				_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(termproto.CloseTakenOver, ""), time.Now().Add(time.Second))
				return
			}
			if !write(websocket.BinaryMessage, termproto.AppendOutput(nil, off, f.Data)) {
				return
			}
			off += int64(len(f.Data))
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/"
}

func TestClientRecordsOutputFramesAndMessages(t *testing.T) {
	url := echoServer(t)
	c, _, err := Dial(t, url+"?ok", nil, Hello(t, termproto.Hello{}))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.WaitMsg("attached").(termproto.Attached); a.Epoch != "e1" || a.Name != "xxxxxxxx" {
		t.Fatalf("attached %+v (want the default 80 columns)", a)
	}
	c.Input("abc")
	c.Input("de")
	c.WaitOutput("abcde")
	if p := c.Position(); p != 5 {
		t.Fatalf("position %d, want 5", p)
	}
	if f := c.Frames(); len(f) != 2 || f[0] != (Frame{0, 3}) || f[1] != (Frame{3, 2}) {
		t.Fatalf("frames %+v", f)
	}
	c.Send(termproto.Reset{})
	if rd := c.WaitMsg("reset").(termproto.ResetDone); rd.Epoch != "e2" || c.Position() != 0 {
		t.Fatalf("reset %+v, position %d", rd, c.Position())
	}
	c.Input("bye")
	if code := c.WaitClosed(); code != termproto.CloseTakenOver {
		t.Fatalf("close code %d, want %d", code, termproto.CloseTakenOver)
	}
}

func TestDialRefused(t *testing.T) {
	url := echoServer(t)
	_, resp, err := Dial(t, url, nil, Hello(t, termproto.Hello{}))
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("refused dial: %v %v", err, resp)
	}
}

func TestCloseEndsReadLoop(t *testing.T) {
	c, _, err := Dial(t, echoServer(t)+"?ok", nil, Hello(t, termproto.Hello{Cols: 120, Rows: 40}))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.WaitMsg("attached").(termproto.Attached); len(a.Name) != 12 {
		t.Fatalf("attached %+v (want 120 columns)", a)
	}
	_ = c.Close()
	if code := c.WaitClosed(); code != -1 {
		t.Fatalf("close code after a local close %d, want -1", code)
	}
}

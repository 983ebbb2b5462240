package term

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api/termproto"
)

func TestFrameRoundTrip(t *testing.T) {
	out := EncodeOutput(Chunk{Offset: 1<<40 + 5, Data: []byte("hi")})
	want := []byte{0x01, 0, 0, 1, 0, 0, 0, 0, 5, 'h', 'i'}
	if !bytes.Equal(out, want) {
		t.Fatalf("output frame % x, want % x", out, want)
	}
	f, err := termproto.DecodeFrame(out)
	if err != nil || f.Type != termproto.FrameOutput || f.Offset != 1<<40+5 || string(f.Data) != "hi" {
		t.Fatalf("decode output: %+v %v", f, err)
	}
	f, err = termproto.DecodeFrame(termproto.EncodeInput([]byte("ls\r")))
	if err != nil || f.Type != termproto.FrameInput || string(f.Data) != "ls\r" {
		t.Fatalf("decode input: %+v %v", f, err)
	}
	f, err = termproto.DecodeFrame(termproto.EncodeOutOfBand(ResetSequence))
	if err != nil || f.Type != termproto.FrameOutOfBand || !bytes.Equal(f.Data, ResetSequence) {
		t.Fatalf("decode oob: %+v %v", f, err)
	}
}

func TestFrameDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, termproto.ErrEmptyFrame},
		{"unknown type", []byte{0x07, 'x'}, termproto.ErrUnknownFrame},
		{"short output", []byte{0x01, 0, 0}, termproto.ErrShortFrame},
		{"oversize input", append([]byte{0x00}, make([]byte, termproto.MaxInputBytes+1)...), termproto.ErrFrameTooBig},
		{"oversize frame", make([]byte, termproto.MaxFrameBytes+1), termproto.ErrFrameTooBig},
		{"negative offset", []byte{0x01, 0xff, 0, 0, 0, 0, 0, 0, 0}, termproto.ErrBadField},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := termproto.DecodeFrame(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMessageEncoding(t *testing.T) {
	off := int64(42)
	cases := []struct {
		msg  termproto.Message
		want string
	}{
		{termproto.Hello{Cols: 80, Rows: 24}, `{"type":"hello","cols":80,"rows":24}`},
		{termproto.Hello{Cols: 80, Rows: 24, Epoch: "e1", Offset: &off}, `{"type":"hello","cols":80,"rows":24,"epoch":"e1","offset":42}`},
		{termproto.Attached{Name: "shell", Epoch: "e1", Offset: 42, Replay: termproto.ReplayDelta, Pid: 7}, `{"type":"attached","name":"shell","epoch":"e1","offset":42,"replay":"delta","pid":7}`},
		{termproto.Reset{}, `{"type":"reset"}`},
		{termproto.ResetDone{Epoch: "e2"}, `{"type":"reset","epoch":"e2"}`},
		{termproto.TakenOver{}, `{"type":"taken_over"}`},
		{termproto.Exited{Code: 3}, `{"type":"exited","code":3}`},
		{termproto.Error{Code: "bad_request", Message: "x"}, `{"type":"error","code":"bad_request","message":"x"}`},
		{termproto.Ack{Offset: 9}, `{"type":"ack","offset":9}`},
		{termproto.Ping{}, `{"type":"ping"}`},
		{termproto.Pong{}, `{"type":"pong"}`},
	}
	for _, tc := range cases {
		b, err := termproto.EncodeMessage(tc.msg)
		if err != nil || string(b) != tc.want {
			t.Errorf("encode %T: %s (%v), want %s", tc.msg, b, err, tc.want)
		}
	}
	for _, s := range []string{`{"type":"attached","name":"shell","epoch":"e","offset":1,"replay":"full","pid":2}`, `{"type":"exited","code":0}`, `{"type":"taken_over"}`, `{"type":"reset","epoch":"x"}`, `{"type":"pong"}`, `{"type":"error","code":"c","message":"m"}`} {
		if _, err := termproto.DecodeServerMessage([]byte(s)); err != nil {
			t.Errorf("decode server %s: %v", s, err)
		}
	}
}

func TestDecodeClientMessage(t *testing.T) {
	cases := []struct {
		in   string
		want error // nil = valid
	}{
		{`{"type":"hello","cols":80,"rows":24}`, nil},
		{`{"type":"hello","cols":80,"rows":24,"epoch":"e","offset":10,"token":"t","extra":1}`, nil},
		{`{"type":"resize","cols":1,"rows":1}`, nil},
		{`{"type":"resize","cols":1000,"rows":1000}`, nil},
		{`{"type":"reset"}`, nil},
		{`{"type":"ack","offset":0}`, nil},
		{`{"type":"ping"}`, nil},
		{`{"type":"resize","cols":0,"rows":24}`, termproto.ErrBadSize},
		{`{"type":"resize","cols":100000,"rows":24}`, termproto.ErrBadSize},
		{`{"type":"resize","cols":80,"rows":-1}`, termproto.ErrBadSize},
		{`{"type":"hello","cols":0,"rows":0}`, termproto.ErrBadSize},
		{`{"type":"hello"}`, termproto.ErrBadSize},
		{`{"type":"hello","cols":80,"rows":24,"offset":-1}`, termproto.ErrBadField},
		{`{"type":"hello","cols":80,"rows":24,"client":{"host":"laptop","pid":42,"nonce":"n"}}`, nil},
		{`{"type":"hello","cols":80,"rows":24,"client":{}}`, nil},
		{`{"type":"hello","cols":80,"rows":24,"client":{"host":"laptop","pid":-1,"nonce":"n"}}`, termproto.ErrBadField},
		{`{"type":"hello","cols":80,"rows":24,"client":{"host":"a\u001b[2J","pid":1,"nonce":"n"}}`, termproto.ErrBadField},
		{`{"type":"hello","cols":80,"rows":24,"client":{"host":"h","pid":1,"nonce":"` + strings.Repeat("n", 129) + `"}}`, termproto.ErrBadField},
		{`{"type":"hello","cols":80,"rows":24,"client":"laptop"}`, termproto.ErrBadJSON},
		{`{"type":"ack","offset":-5}`, termproto.ErrBadField},
		{`{"type":"resize","cols":"80","rows":24}`, termproto.ErrBadJSON},
		{`{"type":"launch_missiles"}`, termproto.ErrUnknownType},
		{`{"type":"attached"}`, termproto.ErrUnknownType},
		{`{"cols":80}`, termproto.ErrBadJSON},
		{`{"type":`, termproto.ErrBadJSON},
		{`not json`, termproto.ErrBadJSON},
		{`[]`, termproto.ErrBadJSON},
		{`{"type":7}`, termproto.ErrBadJSON},
		{`{"type":"ping","pad":"` + strings.Repeat("x", termproto.MaxControlBytes) + `"}`, termproto.ErrFrameTooBig},
	}
	for _, tc := range cases {
		m, err := termproto.DecodeClientMessage([]byte(tc.in))
		if tc.want == nil {
			if err != nil || m == nil {
				t.Errorf("%.60s: unexpected error %v", tc.in, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%.60s: err %v, want %v", tc.in, err, tc.want)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte{0x01, 0, 0, 0, 0, 0, 0, 0, 1, 'x'})
	f.Add([]byte{0x00, 'l', 's'})
	f.Add([]byte{0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := termproto.DecodeFrame(b)
		if err != nil {
			return
		}
		var re []byte
		switch fr.Type {
		case termproto.FrameOutput:
			re = EncodeOutput(Chunk{Offset: fr.Offset, Data: fr.Data})
		case termproto.FrameInput:
			re = termproto.EncodeInput(fr.Data)
		case termproto.FrameOutOfBand:
			re = termproto.EncodeOutOfBand(fr.Data)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("re-encoding % x gave % x", b, re)
		}
	})
}

func FuzzDecodeClientMessage(f *testing.F) {
	f.Add([]byte(`{"type":"hello","cols":80,"rows":24,"epoch":"e","offset":3}`))
	f.Add([]byte(`{"type":"resize","cols":100000,"rows":1}`))
	f.Add([]byte(`{"type":"ack","offset":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := termproto.DecodeClientMessage(b)
		if err != nil {
			return
		}
		switch m := m.(type) {
		case termproto.Hello:
			if termproto.CheckSize(m.Cols, m.Rows) != nil {
				t.Fatalf("accepted hello with size %dx%d", m.Cols, m.Rows)
			}
		case termproto.Resize:
			if termproto.CheckSize(m.Cols, m.Rows) != nil {
				t.Fatalf("accepted resize %dx%d", m.Cols, m.Rows)
			}
		case termproto.Ack:
			if m.Offset < 0 {
				t.Fatalf("accepted negative ack")
			}
		}
		if _, err := termproto.EncodeMessage(m); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

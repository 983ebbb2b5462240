// Package termproto is the wire format of Paddock's terminal WebSocket protocol
// (paddock.terminal.v1, docs/TERMINAL.md): its binary frames, its JSON control
// messages, their limits, error codes and close codes, with strict decoders.
// The server side (shared/term), the relay (supervisor/terminal) and every
// client (the CLI's attach) speak it through this package, so a client links
// no PTY code. Like package api it imports only the standard library.
package termproto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Subprotocol is the WebSocket subprotocol of Paddock terminals.
const Subprotocol = "paddock.terminal.v1"

// Binary frame types (the first byte of a binary WebSocket message).
const (
	// FrameInput carries keyboard input, client → server: 0x00 + bytes.
	FrameInput byte = 0x00
	// FrameOutput carries stream output, server → client: 0x01 + 8-byte big-endian
	// offset of the first byte + bytes.
	FrameOutput byte = 0x01
	// FrameOutOfBand carries bytes that are not part of the stream (the reset sent before
	// a full replay, notices), server → client: 0x02 + bytes.
	FrameOutOfBand byte = 0x02
)

// Limits enforced by the decoders.
const (
	// MaxInputBytes is the largest input payload accepted in one frame.
	MaxInputBytes = 64 << 10
	// MaxControlBytes is the largest JSON control message accepted.
	MaxControlBytes = 4 << 10
	// MaxFrameBytes is the largest binary frame (type byte + header + payload) decoded.
	MaxFrameBytes = 1 + 8 + 1<<20
	// MinSize and MaxSize bound cols and rows.
	MinSize, MaxSize = 1, 1000
)

// Close codes used on terminal WebSockets.
const (
	// CloseTakenOver closes a connection whose terminal was taken over by another.
	CloseTakenOver = 4001
	// CloseBadHello closes a connection whose first message was not a valid hello.
	CloseBadHello = 4000
	// CloseTerminalGone closes a connection whose terminal was ended (idle, Close).
	CloseTerminalGone = 4002
	// CloseUnauthorized closes a connection whose hello token was refused.
	CloseUnauthorized = 4003
)

// Error codes carried in error messages.
const (
	CodeBadRequest = "bad_request"
	CodeTooLarge   = "too_large"
	CodeExited     = "exited"
	CodeUnauth     = "unauthorized"
	CodeInternal   = "internal"
)

// Sentinel decode errors; the returned errors wrap one of them.
var (
	ErrEmptyFrame   = errors.New("empty frame")
	ErrUnknownFrame = errors.New("unknown frame type")
	ErrShortFrame   = errors.New("frame too short")
	ErrFrameTooBig  = errors.New("frame too large")
	ErrBadJSON      = errors.New("invalid JSON control message")
	ErrUnknownType  = errors.New("unknown control message type")
	ErrBadSize      = errors.New("cols/rows out of range 1..1000")
	ErrBadField     = errors.New("invalid field")
)

// Frame is a decoded binary frame.
type Frame struct {
	Type   byte
	Offset int64 // FrameOutput only
	Data   []byte
}

// AppendOutput appends an output frame for bytes at stream offset off to dst.
func AppendOutput(dst []byte, off int64, data []byte) []byte {
	dst = append(dst, FrameOutput)
	dst = binary.BigEndian.AppendUint64(dst, uint64(off))
	return append(dst, data...)
}

// EncodeOutOfBand returns an out-of-stream frame carrying data.
func EncodeOutOfBand(data []byte) []byte {
	return append([]byte{FrameOutOfBand}, data...)
}

// EncodeInput returns an input frame carrying data.
func EncodeInput(data []byte) []byte {
	return append([]byte{FrameInput}, data...)
}

// DecodeFrame decodes a binary frame of any type. Data aliases b.
func DecodeFrame(b []byte) (Frame, error) {
	if len(b) == 0 {
		return Frame{}, fmt.Errorf("decode frame: %w", ErrEmptyFrame)
	}
	if len(b) > MaxFrameBytes {
		return Frame{}, fmt.Errorf("decode frame of %d bytes (max %d): %w", len(b), MaxFrameBytes, ErrFrameTooBig)
	}
	switch b[0] {
	case FrameInput:
		if len(b)-1 > MaxInputBytes {
			return Frame{}, fmt.Errorf("decode input of %d bytes (max %d): %w", len(b)-1, MaxInputBytes, ErrFrameTooBig)
		}
		return Frame{Type: FrameInput, Data: b[1:]}, nil
	case FrameOutOfBand:
		return Frame{Type: FrameOutOfBand, Data: b[1:]}, nil
	case FrameOutput:
		if len(b) < 9 {
			return Frame{}, fmt.Errorf("decode output frame of %d bytes: %w", len(b), ErrShortFrame)
		}
		off := binary.BigEndian.Uint64(b[1:9])
		if off > 1<<62 {
			return Frame{}, fmt.Errorf("decode output frame: offset %d: %w", off, ErrBadField)
		}
		return Frame{Type: FrameOutput, Offset: int64(off), Data: b[9:]}, nil
	}
	return Frame{}, fmt.Errorf("decode frame type 0x%02x: %w", b[0], ErrUnknownFrame)
}

// Message is a JSON control message; the concrete types below implement it.
type Message interface {
	// MessageType is the value of the message's "type" field.
	MessageType() string
}

// Hello is the client's first message. Epoch and Offset are set by a client that kept
// its screen and wants only what it missed; Token authenticates browsers; Client names
// the program that will control the terminal (optional).
type Hello struct {
	Cols   int       `json:"cols"`
	Rows   int       `json:"rows"`
	Epoch  string    `json:"epoch,omitempty"`
	Offset *int64    `json:"offset,omitempty"`
	Token  string    `json:"token,omitempty"`
	Client *ClientID `json:"client,omitempty"`
}

// ClientID identifies a terminal's controlling program: its host, its pid there and
// a nonce it made at start, so a reused pid is a different client.
type ClientID struct {
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Nonce string `json:"nonce"`
}

// Bounds of a ClientID's fields.
const (
	MaxClientHost  = 255
	MaxClientNonce = 128
)

// check validates a client identity: bounded, printable strings and a pid that is
// not negative.
func (c ClientID) check() error {
	switch {
	case c.PID < 0:
		return fmt.Errorf("hello client pid %d: %w", c.PID, ErrBadField)
	case len(c.Host) > MaxClientHost || !printable(c.Host):
		return fmt.Errorf("hello client host (at most %d printable bytes): %w", MaxClientHost, ErrBadField)
	case len(c.Nonce) > MaxClientNonce || !printable(c.Nonce):
		return fmt.Errorf("hello client nonce (at most %d printable bytes): %w", MaxClientNonce, ErrBadField)
	}
	return nil
}

// CheckComplete reports what is wrong with an identity that must be whole,
// as a chat's registration as a session's controller (PUT
// /v1/sessions/{id}/controller): it is released and renewed by its nonce
// and shown by its host, so both must be given, bounded and printable, and
// the pid positive.
func (c ClientID) CheckComplete() error {
	switch {
	case c.Host == "" || len(c.Host) > MaxClientHost || !printable(c.Host):
		return fmt.Errorf("client host %q: must be 1 to %d printable bytes", c.Host, MaxClientHost)
	case c.PID <= 0:
		return fmt.Errorf("client pid %d: must be positive", c.PID)
	case c.Nonce == "":
		return errors.New("client nonce is empty")
	case len(c.Nonce) > MaxClientNonce || !printable(c.Nonce):
		return fmt.Errorf("client nonce: must be at most %d printable bytes", MaxClientNonce)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Attached answers a hello: which terminal, its epoch, the stream offset where live
// output continues, the replay kind that follows, the shell's pid and an optional notice
// (e.g. that the previous shell had exited and a new one was started).
type Attached struct {
	Name   string     `json:"name"`
	Epoch  string     `json:"epoch"`
	Offset int64      `json:"offset"`
	Replay ReplayKind `json:"replay"`
	Pid    int        `json:"pid"`
	Notice string     `json:"notice,omitempty"`
}

// Resize sets the terminal size (client → server).
type Resize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Reset asks for a fresh shell (client → server).
type Reset struct{}

// ResetDone tells the client the shell was replaced and the stream restarts at offset 0
// of a new epoch (server → client; type "reset").
type ResetDone struct {
	Epoch string `json:"epoch"`
	Pid   int    `json:"pid,omitempty"`
}

// Ack tells the server the client has processed the stream up to Offset.
type Ack struct {
	Offset int64 `json:"offset"`
}

// Ping asks for a Pong.
type Ping struct{}

// Pong answers a Ping.
type Pong struct{}

// Exited tells the client the shell exited with Code.
type Exited struct {
	Code int `json:"code"`
}

// TakenOver tells the client another connection took the terminal; close code 4001 follows.
type TakenOver struct{}

// Error reports a problem with a client message or the terminal.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MessageType implements Message.
func (Hello) MessageType() string { return "hello" }

// MessageType implements Message.
func (Attached) MessageType() string { return "attached" }

// MessageType implements Message.
func (Resize) MessageType() string { return "resize" }

// MessageType implements Message.
func (Reset) MessageType() string { return "reset" }

// MessageType implements Message.
func (ResetDone) MessageType() string { return "reset" }

// MessageType implements Message.
func (Ack) MessageType() string { return "ack" }

// MessageType implements Message.
func (Ping) MessageType() string { return "ping" }

// MessageType implements Message.
func (Pong) MessageType() string { return "pong" }

// MessageType implements Message.
func (Exited) MessageType() string { return "exited" }

// MessageType implements Message.
func (TakenOver) MessageType() string { return "taken_over" }

// MessageType implements Message.
func (Error) MessageType() string { return "error" }

// EncodeMessage returns the JSON text of m with its "type" field first.
func EncodeMessage(m Message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s message: %w", m.MessageType(), err)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	t, _ := json.Marshal(m.MessageType())
	b.Write(t)
	if len(body) > 2 { // not "{}"
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

func decodeType(b []byte) (string, error) {
	if len(b) > MaxControlBytes {
		return "", fmt.Errorf("control message of %d bytes (max %d): %w", len(b), MaxControlBytes, ErrFrameTooBig)
	}
	var env struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if env.Type == nil {
		return "", fmt.Errorf("%w: missing \"type\"", ErrBadJSON)
	}
	return *env.Type, nil
}

func unmarshalInto[T Message](b []byte) (Message, error) {
	var m T
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadJSON, m.MessageType(), err)
	}
	return m, nil
}

// CheckSize validates terminal dimensions.
func CheckSize(cols, rows int) error {
	if cols < MinSize || cols > MaxSize || rows < MinSize || rows > MaxSize {
		return fmt.Errorf("size %dx%d: %w", cols, rows, ErrBadSize)
	}
	return nil
}

// DecodeClientMessage decodes a control message sent by a client: hello, resize,
// reset, ack or ping. Sizes are checked; an ack offset must not be negative.
func DecodeClientMessage(b []byte) (Message, error) {
	typ, err := decodeType(b)
	if err != nil {
		return nil, err
	}
	var m Message
	switch typ {
	case "hello":
		m, err = unmarshalInto[Hello](b)
		if err == nil {
			h := m.(Hello)
			if err = CheckSize(h.Cols, h.Rows); err == nil && h.Offset != nil && *h.Offset < 0 {
				err = fmt.Errorf("hello offset %d: %w", *h.Offset, ErrBadField)
			}
			if err == nil && h.Client != nil {
				err = h.Client.check()
			}
		}
	case "resize":
		m, err = unmarshalInto[Resize](b)
		if err == nil {
			err = CheckSize(m.(Resize).Cols, m.(Resize).Rows)
		}
	case "reset":
		m, err = unmarshalInto[Reset](b)
	case "ack":
		m, err = unmarshalInto[Ack](b)
		if err == nil && m.(Ack).Offset < 0 {
			err = fmt.Errorf("ack offset %d: %w", m.(Ack).Offset, ErrBadField)
		}
	case "ping":
		m, err = unmarshalInto[Ping](b)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownType, typ)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeServerMessage decodes a control message sent by a server: attached, reset,
// exited, taken_over, pong or error.
func DecodeServerMessage(b []byte) (Message, error) {
	typ, err := decodeType(b)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "attached":
		return unmarshalInto[Attached](b)
	case "reset":
		return unmarshalInto[ResetDone](b)
	case "exited":
		return unmarshalInto[Exited](b)
	case "taken_over":
		return unmarshalInto[TakenOver](b)
	case "pong":
		return unmarshalInto[Pong](b)
	case "error":
		return unmarshalInto[Error](b)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownType, typ)
}

// ReplayKind says what a replay holds.
type ReplayKind string

// Replay kinds, as sent in the "replay" field of the attached message.
const (
	// ReplayNone means the client is up to date: nothing to send.
	ReplayNone ReplayKind = "none"
	// ReplayDelta means only the bytes after the client's offset follow.
	ReplayDelta ReplayKind = "delta"
	// ReplayFull means the ring from its oldest safe cut point follows; the client must
	// reset its screen first.
	ReplayFull ReplayKind = "full"
)

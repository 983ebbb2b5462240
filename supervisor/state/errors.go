package state

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors for domain failures. Apply returns them wrapped in a
// *Result; callers branch with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)

// Result is what FSM.Apply returns through raft's ApplyFuture.Response.
type Result struct {
	// Index is the raft index of the command that first applied this key.
	Index uint64
	// Duplicate is true when the key had already been applied.
	Duplicate bool
	// FencingToken is set by lease claims.
	FencingToken uint64
	// Err is the domain error, if any (wrapping one of the sentinels).
	Err error
}

func notFound(kind, id string) error {
	return fmt.Errorf("%s %q %w", kind, id, ErrNotFound)
}

func conflictf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConflict, fmt.Sprintf(format, args...))
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// codeOf names the sentinel an error wraps, for persisting dedupe outcomes.
func codeOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	}
	return "error"
}

// outcomeError rebuilds a persisted outcome so errors.Is still works when a
// duplicate key returns the first result again.
type outcomeError struct {
	code, msg string
}

func (e *outcomeError) Error() string { return e.msg }

func (e *outcomeError) Unwrap() error {
	switch e.code {
	case "not_found":
		return ErrNotFound
	case "conflict":
		return ErrConflict
	case "invalid":
		return ErrInvalid
	}
	return nil
}

// wireResult is Result's JSON form, for commands forwarded between nodes.
type wireResult struct {
	Index        uint64 `json:"index"`
	Duplicate    bool   `json:"duplicate,omitempty"`
	FencingToken uint64 `json:"fencing_token,omitempty"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
}

// MarshalJSON encodes a result with its domain error as code and message.
func (r *Result) MarshalJSON() ([]byte, error) {
	w := wireResult{Index: r.Index, Duplicate: r.Duplicate, FencingToken: r.FencingToken, Code: codeOf(r.Err)}
	if r.Err != nil {
		w.Message = r.Err.Error()
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes a result, rebuilding an error that errors.Is
// matches against the sentinels.
func (r *Result) UnmarshalJSON(b []byte) error {
	var w wireResult
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Result{Index: w.Index, Duplicate: w.Duplicate, FencingToken: w.FencingToken}
	if w.Code != "" {
		r.Err = &outcomeError{code: w.Code, msg: w.Message}
	}
	return nil
}

package runtime

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimepb "github.com/paddockhq/paddock/shared/runtime/proto"
)

// Sentinel errors a plugin returns (wrapped with context) and the host gets
// back across the process boundary; branch on them with errors.Is.
var (
	// ErrNotFound: the executor a handle names is gone and cannot be recovered.
	ErrNotFound = errors.New("executor not found")
	// ErrInvalidConfig: the plugin's configuration is invalid or missing.
	ErrInvalidConfig = errors.New("invalid plugin configuration")
	// ErrUnavailable: the runtime cannot serve the request right now
	// (a daemon down, a host unreachable); retrying later may work.
	ErrUnavailable = errors.New("runtime unavailable")
	// ErrInvalidRequest: the request itself is malformed.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnsupported: the plugin does not implement an optional capability
	// (such as Reconciler). A host treats it as "nothing to do", not a fault.
	ErrUnsupported = errors.New("not supported by this runtime")
)

// ErrHandshake is returned by NewClient when the executable does not complete
// the go-plugin handshake with Handshake (wrong cookie, wrong protocol
// version, not a plugin, or exited at start).
var ErrHandshake = errors.New("plugin handshake failed")

// ErrIncompatibleAPIVersion is returned by NewClient when the plugin's API
// version is not one the host supports.
var ErrIncompatibleAPIVersion = errors.New("incompatible plugin API version")

type kindInfo struct {
	sentinel error
	kind     runtimepb.ErrorDetail_Kind
	code     codes.Code
}

var kinds = []kindInfo{
	{ErrNotFound, runtimepb.ErrorDetail_KIND_NOT_FOUND, codes.NotFound},
	{ErrInvalidConfig, runtimepb.ErrorDetail_KIND_INVALID_CONFIG, codes.FailedPrecondition},
	{ErrUnavailable, runtimepb.ErrorDetail_KIND_UNAVAILABLE, codes.Unavailable},
	{ErrInvalidRequest, runtimepb.ErrorDetail_KIND_INVALID_REQUEST, codes.InvalidArgument},
	{ErrUnsupported, runtimepb.ErrorDetail_KIND_UNSUPPORTED, codes.Unimplemented},
}

// remoteError is an error returned by a plugin, rebuilt on the host side.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// toStatus turns a plugin's error into a gRPC status error carrying an
// ErrorDetail for the typed errors.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isTyped(err) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	for _, k := range kinds {
		if errors.Is(err, k.sentinel) {
			st := status.New(k.code, err.Error())
			if withDetail, derr := st.WithDetails(&runtimepb.ErrorDetail{Kind: k.kind}); derr == nil {
				st = withDetail
			}
			return st.Err()
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

func isTyped(err error) bool {
	for _, k := range kinds {
		if errors.Is(err, k.sentinel) {
			return true
		}
	}
	return false
}

// fromStatus turns a gRPC error from a plugin back into an error that wraps
// the matching sentinel. Errors without a detail map by status code; transport
// failures (the plugin died) become ErrUnavailable.
func fromStatus(op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("runtime %s: %w", op, err)
	}
	msg := fmt.Sprintf("runtime %s: %s", op, st.Message())
	for _, d := range st.Details() {
		if ed, ok := d.(*runtimepb.ErrorDetail); ok {
			for _, k := range kinds {
				if k.kind == ed.GetKind() {
					return &remoteError{msg: msg, sentinel: k.sentinel}
				}
			}
		}
	}
	switch st.Code() {
	case codes.NotFound:
		return &remoteError{msg: msg, sentinel: ErrNotFound}
	case codes.InvalidArgument:
		return &remoteError{msg: msg, sentinel: ErrInvalidRequest}
	case codes.FailedPrecondition:
		return &remoteError{msg: msg, sentinel: ErrInvalidConfig}
	case codes.Unavailable:
		return &remoteError{msg: msg, sentinel: ErrUnavailable}
	case codes.Unimplemented:
		// A plugin built before the method existed answers UNIMPLEMENTED
		// without a detail.
		return &remoteError{msg: msg, sentinel: ErrUnsupported}
	case codes.Canceled:
		return &remoteError{msg: msg, sentinel: context.Canceled}
	case codes.DeadlineExceeded:
		return &remoteError{msg: msg, sentinel: context.DeadlineExceeded}
	}
	return errors.New(msg)
}

var errEmptyHandle = fmt.Errorf("handle is empty: %w", ErrInvalidRequest)

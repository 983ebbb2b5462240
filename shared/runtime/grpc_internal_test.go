package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimepb "github.com/paddockhq/paddock/shared/runtime/proto"
)

// onlyRuntime is a Runtime without the optional Reconciler.
type onlyRuntime struct{ Runtime }

// recordingReconciler records whether Reconcile was reached.
type recordingReconciler struct {
	onlyRuntime
	called bool
}

func (r *recordingReconciler) Reconcile(context.Context, ReconcileRequest) ([]string, error) {
	r.called = true
	return nil, nil
}

// The server side refuses malformed requests before the plugin sees them
// (the host-side client validates too, so only a foreign host reaches this),
// and answers UNIMPLEMENTED with a typed detail for a plugin without the
// capability.
func TestReconcileServerSide(t *testing.T) {
	ctx := context.Background()
	rec := &recordingReconciler{}
	srv := &grpcServer{impl: rec}
	for name, req := range map[string]*runtimepb.ReconcileRequest{
		"negative_grace": {GraceMs: -5},
		"bad_cluster":    {Cluster: "a b"},
		"bad_owned":      {OwnedExecutorIds: []string{"x", "/etc"}},
	} {
		_, err := srv.Reconcile(ctx, req)
		if status.Code(err) != codes.InvalidArgument || !errors.Is(fromStatus("reconcile", err), ErrInvalidRequest) {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if rec.called {
		t.Fatal("the plugin's Reconcile was called with a malformed request")
	}
	if _, err := srv.Reconcile(ctx, &runtimepb.ReconcileRequest{Cluster: "c", OwnedExecutorIds: []string{"ex-1"}, GraceMs: 1000}); err != nil || !rec.called {
		t.Fatalf("valid request: %v (called %v)", err, rec.called)
	}

	_, err := (&grpcServer{impl: onlyRuntime{}}).Reconcile(ctx, &runtimepb.ReconcileRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("plugin without Reconciler: %v, want Unimplemented", err)
	}
	if !errors.Is(fromStatus("reconcile", err), ErrUnsupported) {
		t.Fatalf("Unimplemented with detail maps to %v", fromStatus("reconcile", err))
	}
	// A plugin built before the method existed: gRPC's own UNIMPLEMENTED,
	// no detail.
	_, err = (runtimepb.UnimplementedRuntimeServer{}).Reconcile(ctx, &runtimepb.ReconcileRequest{})
	if got := fromStatus("reconcile", err); !errors.Is(got, ErrUnsupported) {
		t.Fatalf("bare Unimplemented maps to %v, want ErrUnsupported", got)
	}
	if got := fromStatus("reconcile", status.Error(codes.Unimplemented, "unknown method Reconcile")); !errors.Is(got, ErrUnsupported) || errors.Is(got, ErrNotFound) {
		t.Fatalf("bare Unimplemented maps to %v", got)
	}
}

// FuzzReconcileServer: whatever a host sends, the plugin's Reconcile is
// called only with a request that validates (ids usable as labels, a
// non-negative grace), and anything refused is InvalidArgument.
func FuzzReconcileServer(f *testing.F) {
	f.Add("paddock", "ex-1", "ex-2", int64(120000))
	f.Add("", "", "../x", int64(-1))
	f.Add("a b", "ex\x00", "-rf", int64(0))
	f.Fuzz(func(t *testing.T, cluster, id1, id2 string, graceMS int64) {
		var got *ReconcileRequest
		impl := &capturingReconciler{got: &got}
		_, err := (&grpcServer{impl: impl}).Reconcile(context.Background(),
			&runtimepb.ReconcileRequest{Cluster: cluster, OwnedExecutorIds: []string{id1, id2}, GraceMs: graceMS})
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || got != nil {
				t.Fatalf("refused with %v (plugin called: %v)", err, got != nil)
			}
			return
		}
		if got == nil || got.Validate() != nil || got.Grace < 0 || (cluster != "" && !ValidID(got.Cluster)) {
			t.Fatalf("plugin called with %+v", got)
		}
		for _, id := range got.Owned {
			if !ValidID(id) {
				t.Fatalf("owned id %q reached the plugin", id)
			}
		}
	})
}

type capturingReconciler struct {
	onlyRuntime
	got **ReconcileRequest
}

func (c *capturingReconciler) Reconcile(_ context.Context, req ReconcileRequest) ([]string, error) {
	*c.got = &req
	return nil, nil
}

// Malformed terminal settings from a foreign host are never read as
// "default": they survive conversion as invalid values Validate refuses.
func TestTerminalFromPBKeepsInvalidValues(t *testing.T) {
	for name, pb := range map[string]*runtimepb.TerminalSettings{
		"negative_replay":  {ReplayBytes: -5},
		"negative_timeout": {IdleTimeoutMs: -5},
		"empty_program":    {Shell: []string{""}},
	} {
		if err := terminalFromPB(pb).Validate(); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	in := Terminal{Shell: []string{"sh"}, ReplayBytes: 5000, IdleTimeout: 3 * time.Second}
	if out := terminalFromPB(terminalToPB(in)); out.ReplayBytes != in.ReplayBytes || out.IdleTimeout != in.IdleTimeout || len(out.Shell) != 1 || out.Shell[0] != "sh" {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
	if terminalToPB(Terminal{}) != nil || !terminalFromPB(nil).IsZero() {
		t.Fatal("zero terminal does not map to nil and back")
	}
	if out := terminalFromPB(terminalToPB(Terminal{IdleTimeout: time.Microsecond})); out.IdleTimeout <= 0 {
		t.Fatalf("a set sub-millisecond idle timeout became %s", out.IdleTimeout)
	}
}

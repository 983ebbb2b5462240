package recovery

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/plugins"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Defaults of the orphan reconciler.
const (
	// DefaultCluster is the cluster name the session manager puts in every
	// launch request when it is given none (sessions.Options.ClusterName).
	DefaultCluster = "paddock"
	// DefaultOrphanGrace is how old an unowned executor must be before it is
	// removed: it covers the moment between reading the owned ids and the
	// runtime listing its executors, and clock skew with a remote engine.
	DefaultOrphanGrace = 2 * time.Minute
	// DefaultOrphanInterval is how often the leader reconciles again after
	// the pass that follows recovery (as Nomad's periodic GC).
	DefaultOrphanInterval = 10 * time.Minute
	// DefaultOrphanCallTimeout bounds one runtime's Reconcile call.
	DefaultOrphanCallTimeout = time.Minute
)

// Runtimes is what the orphan reconciler needs from the plugin manager
// (*plugins.Manager has it).
type Runtimes interface {
	List() []plugins.Status
	Get(name string) (runtime.Runtime, error)
}

// OrphanOptions configure the orphan reconciler; zero values take defaults.
type OrphanOptions struct {
	// Runtimes are the loaded runtime plugins. Required.
	Runtimes Runtimes
	// Cluster must be the cluster name launches carry (default
	// DefaultCluster). A wrong name removes nothing: the runtime finds no
	// executor labelled with it.
	Cluster string
	// Grace is the minimum age of an executor before it may be removed
	// (default DefaultOrphanGrace). A runtime may configure its own.
	Grace time.Duration
	// Interval is the time between passes (default DefaultOrphanInterval).
	Interval time.Duration
	// CallTimeout bounds one runtime's Reconcile (default
	// DefaultOrphanCallTimeout).
	CallTimeout time.Duration
}

// OrphanReport is what one reconcile pass did.
type OrphanReport struct {
	Finished time.Time
	// Removed are the removed executors' runtime ids, by runtime name.
	Removed map[string][]string
	// Unsupported lists the runtimes without the capability.
	Unsupported []string
	// Errors are the failed runtimes' errors, by runtime name.
	Errors map[string]error
}

// orphans is the leader's reconciler of executors no executor row owns.
type orphans struct {
	store *state.Store
	opts  OrphanOptions
	log   hclog.Logger
}

// WithOrphans makes Run, once its recovery pass is done, remove the
// executors no executor row owns (runtime.Reconciler) on every healthy
// runtime, then again every Interval until leadership ends. Call it before
// the node starts; it returns r.
func (r *Recovery) WithOrphans(o OrphanOptions) *Recovery {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if o.Grace <= 0 {
		o.Grace = DefaultOrphanGrace
	}
	if o.Interval <= 0 {
		o.Interval = DefaultOrphanInterval
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultOrphanCallTimeout
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.orphans = &orphans{store: r.store, opts: o, log: r.log.Named("orphans")}
	return r
}

// LastOrphans returns the report of the last completed reconcile pass (nil
// before one, or when WithOrphans was not called).
func (r *Recovery) LastOrphans() *OrphanReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastOrphans
}

// reconcileLoop runs a pass at once and then every Interval until ctx ends
// (leadership lost or the server stopping).
func (r *Recovery) reconcileLoop(ctx context.Context, o *orphans) {
	tick := time.NewTicker(o.opts.Interval)
	defer tick.Stop()
	for {
		rep := o.pass(ctx)
		if ctx.Err() != nil {
			return // a pass cut short is not a report
		}
		r.mu.Lock()
		r.lastOrphans = rep
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// owned is every executor id replicated state holds, whatever its status or
// runtime: rows are never deleted (a stopped, failed or deleted session's
// row stays), and two runtimes may share one engine and cluster label, so
// only an executor no row names at all is an orphan.
func (o *orphans) owned() []string {
	rows := o.store.Executors("")
	ids := make([]string, 0, len(rows))
	for _, e := range rows {
		ids = append(ids, e.ID)
	}
	return ids
}

// pass asks every healthy runtime once. The owned ids are read just before
// each call: an executor recorded after that is launched later still, so it
// is younger than the grace.
func (o *orphans) pass(ctx context.Context) *OrphanReport {
	rep := &OrphanReport{Removed: map[string][]string{}, Errors: map[string]error{}}
	for _, st := range o.opts.Runtimes.List() {
		if ctx.Err() != nil {
			break
		}
		if !st.Healthy {
			continue
		}
		removed, err := o.one(ctx, st.Name)
		switch {
		case errors.Is(err, runtime.ErrUnsupported):
			rep.Unsupported = append(rep.Unsupported, st.Name)
			o.log.Debug("runtime has no orphan reconciler", "runtime", st.Name)
		case err != nil:
			rep.Errors[st.Name] = err
			if ctx.Err() == nil {
				o.log.Warn("reconcile orphaned executors", "runtime", st.Name, "error", err)
			}
		}
		for _, id := range removed {
			o.log.Info("removed an orphaned executor", "runtime", st.Name, "id", id)
		}
		if len(removed) > 0 {
			rep.Removed[st.Name] = removed
		}
	}
	rep.Finished = time.Now()
	return rep
}

func (o *orphans) one(ctx context.Context, name string) ([]string, error) {
	rt, err := o.opts.Runtimes.Get(name)
	if err != nil {
		return nil, err
	}
	rc, ok := rt.(runtime.Reconciler)
	if !ok {
		return nil, runtime.ErrUnsupported
	}
	cctx, cancel := context.WithTimeout(ctx, o.opts.CallTimeout)
	defer cancel()
	return rc.Reconcile(cctx, runtime.ReconcileRequest{Cluster: o.opts.Cluster, Owned: o.owned(), Grace: o.opts.Grace})
}

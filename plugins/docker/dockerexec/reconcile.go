package dockerexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/shared/runtime"
)

var _ runtime.Reconciler = (*Runtime)(nil)

// Reconcile implements runtime.Reconciler (the supervisor's leader calls it
// through the SDK's Reconcile RPC): it removes the containers of the cluster
// that no executor in req.Owned owns; see ReconcileCluster. The cluster is
// the `cluster` attribute when set (as for Launch), else req.Cluster; the
// grace is the `reconcile_grace` attribute when set, else req.Grace.
func (r *Runtime) Reconcile(ctx context.Context, req runtime.ReconcileRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	cfg, _, err := r.engine()
	if err != nil {
		return nil, err
	}
	cluster := cfg.Cluster
	if cluster == "" {
		cluster = req.Cluster
	}
	grace := req.Grace
	if cfg.ReconcileGrace > 0 {
		grace = cfg.ReconcileGrace
	}
	if cluster == "" {
		return nil, fmt.Errorf("reconcile needs a cluster name (in the request or the cluster attribute): %w", runtime.ErrInvalidRequest)
	}
	return r.ReconcileCluster(ctx, cluster, req.OwnedSet(), grace)
}

// ReconcileCluster removes (force) every container labelled
// paddock.cluster=cluster (empty: the configured cluster) whose
// paddock.executor_id owned reports false and that was created more than
// grace ago (so a launch whose executor record is not written yet is left
// alone). Containers without the label, or with another cluster's, are never
// touched; neither are workspaces. It returns the removed container ids.
func (r *Runtime) ReconcileCluster(ctx context.Context, cluster string, owned func(executorID string) bool, grace time.Duration) ([]string, error) {
	cfg, cli, err := r.engine()
	if err != nil {
		return nil, err
	}
	if cluster == "" {
		cluster = cfg.Cluster
	}
	if cluster == "" || !runtime.ValidID(cluster) {
		return nil, fmt.Errorf("reconcile needs a cluster name (set the cluster attribute): %w", runtime.ErrInvalidConfig)
	}
	if owned == nil {
		return nil, fmt.Errorf("reconcile needs an owned function: %w", runtime.ErrInvalidRequest)
	}
	// The cutoff is taken before listing: a container created while the
	// list is slow is never old enough, whatever the list takes.
	cutoff := time.Now().Add(-grace)
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelCluster+"="+cluster)})
	if err != nil {
		return nil, engineErr(cfg, "list containers", err)
	}
	var removed []string
	for _, c := range res.Items {
		if c.Labels[LabelCluster] != cluster || c.Labels[LabelSession] == "" {
			continue // never anything that is not certainly ours
		}
		if owned(c.Labels[LabelExecutor]) || time.Unix(c.Created, 0).After(cutoff) {
			continue
		}
		r.Logger().Info("reconcile: removing an orphaned container", "container_id", shortID(c.ID), "session_id", c.Labels[LabelSession], "executor_id", c.Labels[LabelExecutor])
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return removed, engineErr(cfg, "remove container "+shortID(c.ID), err)
		}
		removed = append(removed, c.ID)
	}
	return removed, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ioLimit(r io.Reader, n int64) io.Reader { return io.LimitReader(r, n) }

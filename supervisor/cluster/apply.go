package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/supervisor/state"
)

// Apply commits a command and returns its result. The command gets a fresh
// idempotency key and this node's clock. On a follower, or when leadership is
// lost mid-apply, the encoded command is forwarded to the current leader with
// the same key, so a retry never applies twice. The returned error is a
// cluster failure (no leader, timeout); domain failures are in Result.Err.
func (n *Node) Apply(ctx context.Context, typ state.CommandType, body any) (*state.Result, error) {
	data, err := encodeNew(typ, body)
	if err != nil {
		return nil, err
	}
	return n.ApplyEncoded(ctx, data)
}

// encodeNew encodes a new command: a fresh idempotency key, this node's
// clock.
func encodeNew(typ state.CommandType, body any) ([]byte, error) {
	return state.Command{Type: typ, Key: NewKey(), Now: time.Now(), Body: body}.Encode()
}

// ApplyEncoded commits an already encoded command (see Apply). The whole
// call is bounded by ApplyTimeout+LeaderWait; the context carrying that
// deadline (a timer) is made only when an attempt fails or this node does
// not lead, so a write on a healthy leader costs none.
func (n *Node) ApplyEncoded(ctx context.Context, data []byte) (*state.Result, error) {
	deadline := time.Now().Add(n.cfg.ApplyTimeout + n.cfg.LeaderWait)
	bounded := false
	for attempt := 0; ; attempt++ {
		leader := n.IsLeader()
		if leader {
			res, err := n.applyLocal(data)
			if err == nil {
				return res, nil
			}
			if !retryable(err) {
				return nil, err
			}
			n.log.Debug("apply interrupted, retrying on the leader", "error", err)
		}
		if !bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
			bounded = true
		}
		if !leader {
			lctx, lcancel := context.WithTimeout(ctx, n.cfg.LeaderWait)
			id, addr, err := n.WaitForLeader(lctx)
			lcancel()
			if err != nil {
				return nil, err
			}
			if id != n.cfg.NodeID {
				res, err := n.forwardApply(ctx, addr, data)
				if err == nil {
					return res, nil
				}
				n.log.Debug("forwarded apply failed, retrying", "leader", id, "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("apply: %w", ErrNoLeader)
		case <-time.After(time.Duration(min(attempt+1, 10)) * 20 * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, ErrNoLeader)
}

func (n *Node) applyLocal(data []byte) (*state.Result, error) {
	return applyResult(n.raft.Apply(data, n.cfg.ApplyTimeout))
}

// applyResult waits for an applied command's result.
func applyResult(f raft.ApplyFuture) (*state.Result, error) {
	if err := f.Error(); err != nil {
		return nil, err
	}
	res, ok := f.Response().(*state.Result)
	if !ok {
		return nil, fmt.Errorf("apply: unexpected response %T", f.Response())
	}
	return res, nil
}

// forwardApply sends an encoded command to the leader's internal endpoint.
func (n *Node) forwardApply(ctx context.Context, leaderHTTP string, data []byte) (*state.Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leaderHTTP+"/v1/internal/apply", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	n.authorize(req)
	resp, err := n.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("forward to %s: %w", leaderHTTP, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("forward to %s: %s: %s", leaderHTTP, resp.Status, bytes.TrimSpace(body))
	}
	var res state.Result
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("forward to %s: decode result: %w", leaderHTTP, err)
	}
	return &res, nil
}

// NodeSecretHeader carries the cluster's node secret on node-to-node calls.
// It is a header of its own so that a user's token is never taken for it.
const NodeSecretHeader = "X-Paddock-Node-Secret"

func (n *Node) authorize(req *http.Request) {
	if n.cfg.NodeSecret != "" {
		req.Header.Set(NodeSecretHeader, n.cfg.NodeSecret)
	}
	if req.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
}

// ErrNotLeader is returned by LeaderApply on a node that does not lead.
var ErrNotLeader = errors.New("not the leader")

// LeaderApply commits a command only while this node leads: leader-only work
// (recovery, session lifecycles) must never act through a newer leader after
// it lost leadership. A retry after raft.ErrLeadershipLost keeps the same
// key, so it cannot apply twice.
func (n *Node) LeaderApply(ctx context.Context, typ state.CommandType, body any) (*state.Result, error) {
	data, err := encodeNew(typ, body)
	if err != nil {
		return nil, err
	}
	return n.leaderApplyEncoded(ctx, data)
}

func (n *Node) leaderApplyEncoded(ctx context.Context, data []byte) (*state.Result, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		if !n.IsLeader() {
			return nil, ErrNotLeader
		}
		res, err := n.applyLocal(data)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, raft.ErrLeadershipLost) {
			if errors.Is(err, raft.ErrNotLeader) {
				return nil, ErrNotLeader
			}
			return nil, err
		}
	}
}

// LeaderApplyAll commits commands in their order, as LeaderApply does each,
// but without waiting for one to commit before proposing the next: they
// reach raft's queue together, so they are usually written, replicated and
// applied as one batch, and a caller's chain of writes (a turn's messages
// and its end) waits for about one commit instead of one per command. It
// returns the results of the commands up to the first that failed, in
// order, and that failure. Raft commits in log order, so a command after
// it committed only if it was refused before reaching the log (a transfer
// in progress, a full queue) while the later one reached it: the caller
// that tries the rest again may write them twice, so they must be
// idempotent or compare-and-set (a message put, a state change "from").
func (n *Node) LeaderApplyAll(ctx context.Context, props []state.Proposal) ([]*state.Result, error) {
	datas := make([][]byte, len(props))
	for i, p := range props {
		data, err := encodeNew(p.Type, p.Body)
		if err != nil {
			return nil, err
		}
		datas[i] = data
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	futures := make([]raft.ApplyFuture, len(datas))
	for i, data := range datas {
		futures[i] = n.raft.Apply(data, n.cfg.ApplyTimeout)
	}
	results := make([]*state.Result, 0, len(datas))
	for i, f := range futures {
		res, err := applyResult(f)
		if errors.Is(err, raft.ErrLeadershipLost) {
			// Whether it committed is unknown; its key makes the retry
			// safe (and it fails at once: this node no longer leads).
			res, err = n.leaderApplyEncoded(ctx, datas[i])
		}
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				err = ErrNotLeader
			}
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

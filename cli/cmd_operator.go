package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// The cluster's commands: status and the operator group (raft peers,
// snapshots).

// snapshotTimeout bounds a snapshot save or restore.
const snapshotTimeout = 10 * time.Minute

func runStatus(e *env, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (*api.ClusterStatus, error) {
		return c.Status(e.ctx(), o...)
	}, func(st *api.ClusterStatus) error {
		leader := st.LeaderID
		if leader == "" {
			leader = "(none)"
		} else if st.LeaderAddress != "" || st.LeaderHTTP != "" {
			leader = fmt.Sprintf("%s (raft %s, http %s)", st.LeaderID, cell(st.LeaderAddress), cell(st.LeaderHTTP))
		}
		if err := kv(e.stdout, [][2]string{
			{"Leader", leader},
			{"Term", strconv.FormatUint(st.Term, 10)},
			{"Commit index", strconv.FormatUint(st.CommitIndex, 10)},
			{"Applied index", strconv.FormatUint(st.AppliedIndex, 10)},
		}); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		return peerTable(e, st.Nodes)
	})
}

func peerTable(e *env, peers []api.Peer) error {
	rows := make([][]string, 0, len(peers))
	for _, p := range peers {
		health, contact := "-", "-"
		if p.Healthy != nil {
			health = map[bool]string{true: "healthy", false: "failed"}[*p.Healthy]
		}
		if p.LastContact != nil && !p.Leader {
			contact = time.Since(*p.LastContact).Round(time.Millisecond).String() + " ago"
		}
		rows = append(rows, []string{p.ID, p.Address, p.Suffrage, strconv.FormatBool(p.Leader), health, contact})
	}
	return table(e.stdout, []string{"ID", "ADDRESS", "SUFFRAGE", "LEADER", "HEALTH", "LAST CONTACT"}, rows)
}

func runListPeers(e *env, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Peer, error) {
		return c.RaftPeers(e.ctx(), o...)
	}, func(peers []api.Peer) error { return peerTable(e, peers) })
}

func runAddPeer(e *env, pos []string) error {
	if err := exactArgs(pos, "server address"); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (string, error) {
		return c.AddPeer(e.ctx(), pos[0], o...)
	}, func(id string) error {
		fmt.Fprintf(e.stdout, "Added peer %s at %s\n", id, pos[0])
		return nil
	})
}

func runRemovePeer(e *env, pos []string) error {
	if err := exactArgs(pos, "peer ID"); err != nil {
		return err
	}
	return e.call(func(c *client.Client, o []client.CallOption) error {
		return c.RemovePeer(e.ctx(), pos[0], o...)
	}, func() error {
		fmt.Fprintf(e.stdout, "Removed peer %s\n", pos[0])
		return nil
	})
}

func transferFlags(fs *flag.FlagSet) *string {
	return fs.String("id", "", "the voter to hand leadership to (default: any)")
}

func runTransferLeadership(e *env, id *string, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	target := *id
	return show(e, func(c *client.Client, o []client.CallOption) (string, error) {
		return c.TransferLeadership(e.ctx(), target, o...)
	}, func(leader string) error {
		fmt.Fprintf(e.stdout, "Leadership transferred to %s\n", cell(leader))
		return nil
	})
}

func runSnapshotSave(e *env, pos []string) error {
	if err := exactArgs(pos, "FILE"); err != nil {
		return err
	}
	path := pos[0]
	c, err := e.client()
	if err != nil {
		return err
	}
	// Write next to the destination and rename, so a failed save never leaves
	// a truncated snapshot under the requested name.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	ctx, cancel := contextWithTimeout(e, snapshotTimeout)
	defer cancel()
	n, err := c.SnapshotSave(ctx, tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("save snapshot: %w", cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if e.g.json {
		return printJSON(e.stdout, fmt.Appendf(nil, `{"file":%q,"bytes":%d}`, path, n))
	}
	fmt.Fprintf(e.stdout, "Saved snapshot to %s (%d bytes)\n", path, n)
	return nil
}

func runSnapshotRestore(e *env, pos []string) error {
	if err := exactArgs(pos, "FILE"); err != nil {
		return err
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	defer f.Close()
	c, err := e.client()
	if err != nil {
		return err
	}
	ctx, cancel := contextWithTimeout(e, snapshotTimeout)
	defer cancel()
	var raw []byte
	res, err := c.SnapshotRestore(ctx, f, client.CaptureBody(&raw))
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "Restored snapshot %s (index %d)\n", pos[0], res.Index)
	return nil
}

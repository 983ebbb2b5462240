package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/nodes"
	"github.com/paddockhq/paddock/supervisor/state"
)

func (s *Server) health(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Node: s.cluster.ID(), Leader: s.cluster.IsLeader()})
	return nil
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) error {
	st, err := s.cluster.Status()
	if err != nil {
		return err
	}
	s.withHealth(st.Nodes)
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) peers(w http.ResponseWriter, _ *http.Request) error {
	peers, err := s.cluster.Peers()
	if err != nil {
		return err
	}
	s.withHealth(peers)
	writeJSON(w, http.StatusOK, map[string]any{"peers": peers})
	return nil
}

// withHealth fills in each server's health and last contact on the leader:
// autopilot's (answers, recent contact with the leader, the leader's term,
// a log within reach of the leader's), else the node watch's. A server
// whose process was killed shows as unhealthy within a few seconds, even
// while raft still counts it a voter.
func (s *Server) withHealth(peers []api.Peer) {
	if !s.cluster.IsLeader() {
		return
	}
	if health, ok := s.cluster.ServerHealth(); ok {
		for i := range peers {
			h, ok := health[peers[i].ID]
			if !ok {
				continue
			}
			healthy := h.Healthy
			peers[i].Healthy = &healthy
			if !h.LastContact.IsZero() {
				last := h.LastContact
				peers[i].LastContact = &last
			}
		}
		return
	}
	if s.nodes == nil {
		return
	}
	health := map[string]nodes.Health{}
	for _, h := range s.nodes.Health() {
		health[h.Node] = h
	}
	for i := range peers {
		h, ok := health[peers[i].ID]
		if !ok {
			continue
		}
		healthy, last := h.Available, h.LastContact
		peers[i].Healthy = &healthy
		if !last.IsZero() {
			peers[i].LastContact = &last
		}
	}
}

// addPeer adds a server by its HTTP address. The server must answer there
// as a node of this cluster (it needs the same node secret).
func (s *Server) addPeer(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Address string `json:"address"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(req.Address); err != nil {
		return badRequest("address must be the new server's HTTP address as host:port, got %q", req.Address)
	}
	p, err := s.cluster.AddPeer(r.Context(), req.Address)
	if err != nil {
		return errorf(http.StatusBadGateway, CodeUnavailable, "%v", err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"added": p.ID, "raft_addr": p.RaftAddr, "http_addr": p.HTTPAddr})
	return nil
}

func (s *Server) removePeer(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if id == s.cluster.ID() {
		return errorf(http.StatusConflict, CodeConflict, "cannot remove the leader %q; transfer leadership first", id)
	}
	if err := s.cluster.RemovePeer(id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
	return nil
}

func (s *Server) transferLeadership(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	leader, err := s.cluster.TransferLeadership(req.ID)
	if err != nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "%v", err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"leader_id": leader})
	return nil
}

func (s *Server) snapshotSave(w http.ResponseWriter, _ *http.Request) error {
	var buf bytes.Buffer
	if err := s.cluster.SnapshotTo(&buf); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="paddock.snap"`)
	_, err := io.Copy(w, &buf)
	return err
}

func (s *Server) snapshotRestore(w http.ResponseWriter, r *http.Request) error {
	if err := s.cluster.Restore(r.Body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "snapshot too large")
		}
		return err
	}
	writeJSON(w, http.StatusOK, api.SnapshotRestoreResult{Restored: true, Index: s.store.LastIndex()})
	return nil
}

// internalProof answers a node's challenge (cluster/proof.go). It is open:
// the asking node may not yet know whether this server is one of its own,
// so it sends no secret, and the answer gives away only who this server is
// and an HMAC no one can use for another challenge.
func (s *Server) internalProof(w http.ResponseWriter, r *http.Request) error {
	challenge := r.URL.Query().Get("challenge")
	if !cluster.ValidChallenge(challenge) {
		return badRequest("challenge must be %d hex characters", 64)
	}
	writeJSON(w, http.StatusOK, s.cluster.Prove(challenge))
	return nil
}

func (s *Server) internalJoin(w http.ResponseWriter, r *http.Request) error {
	var p cluster.PeerInfo
	if err := decode(r, &p); err != nil {
		return err
	}
	// With TLS, a server joins only as the node its certificate names: a
	// join under another server's id would replace that server.
	if s.tls != nil {
		if got := certs.PeerNode(r.TLS); got != p.ID {
			return errorf(http.StatusForbidden, CodeForbidden, "server %q may not join as %q: a server joins under the node name of its certificate", got, p.ID)
		}
	}
	if err := s.cluster.Join(r.Context(), p); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"joined": true})
	return nil
}

// internalApply commits a command forwarded by a peer. The command keeps the
// key it was built with, so a retried forward never applies twice.
func (s *Server) internalApply(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return badRequest("read command: %v", err)
	}
	// A command that does not decode would stop every node's FSM: refuse it here.
	if _, _, err := state.DecodeCommand(data); err != nil {
		return badRequest("invalid command: %v", err)
	}
	res, err := s.cluster.ApplyEncoded(r.Context(), data)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(res)
}

// internalReadIndex answers a follower's CatchUp with this leader's
// confirmed read index.
func (s *Server) internalReadIndex(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.leaderWait)
	defer cancel()
	index, err := s.cluster.ReadIndex(ctx)
	if err != nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "no read index: %v", err)
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"index": index})
	return nil
}

// internalRuntime runs one runtime call in this node's plugin, for the
// leader (the executor belongs to this node).
func (s *Server) internalRuntime(w http.ResponseWriter, r *http.Request) error {
	if s.plugins == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "this node runs no runtime plugins")
	}
	nodes.ServeRuntime(w, r, s.plugins, r.PathValue("name"), r.PathValue("op"))
	return nil
}

// internalPlugins lists this node's plugins, for the leader's node watch.
func (s *Server) internalPlugins(w http.ResponseWriter, _ *http.Request) error {
	if s.plugins == nil {
		writeJSON(w, http.StatusOK, map[string]any{"plugins": []any{}})
		return nil
	}
	nodes.ServePlugins(w, s.plugins, s.cfg.Limits.MaxSessionsPerNode)
	return nil
}

// listNodes is the leader's view of every node as an executor host: whether
// it answers, its last contact, its plugins' health.
func (s *Server) listNodes(w http.ResponseWriter, _ *http.Request) error {
	list := []nodes.Health{}
	if s.nodes != nil {
		list = s.nodes.Health()
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": list})
	return nil
}

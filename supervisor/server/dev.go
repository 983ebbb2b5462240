package server

import (
	"context"
	"time"

	"github.com/paddockhq/paddock/api"
)

// DestroyExecutorsAtExit makes Shutdown destroy the executors this node
// owns (their agentctls and agents, through this node's plugins) before it
// stops raft and the plugins. `paddock server -dev` sets it: its data dir
// is removed at exit, so nothing could ever recover those agentctls, and
// they would run on with no supervisor until their idle timeout. A node
// with a data dir of its own never sets it: its executors outlive it by
// design, for the next start (or leader) to recover.
func (s *Server) DestroyExecutorsAtExit() { s.destroyAtExit.Store(true) }

// destroyExecutors destroys every executor row of this node that has a
// runtime handle; each is tried once, within ctx.
func (s *Server) destroyExecutors(ctx context.Context) {
	self := s.Config.NodeName
	for _, ex := range s.Node.Store().Executors("") {
		if ex.Node != self || len(ex.Handle) == 0 || ex.Status == api.ExecutorStopped {
			continue
		}
		rt, err := s.Nodes.Runtime(self, ex.Runtime)
		if err != nil {
			s.log.Warn("destroy executor at exit", "executor", ex.ID, "session", ex.SessionID, "error", err)
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = rt.Destroy(dctx, ex.Handle)
		cancel()
		if err != nil {
			s.log.Warn("destroy executor at exit", "executor", ex.ID, "session", ex.SessionID, "error", err)
			continue
		}
		s.log.Info("destroyed executor at exit", "executor", ex.ID, "session", ex.SessionID)
	}
}

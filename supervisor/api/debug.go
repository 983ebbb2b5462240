package api

import (
	"net/http"
	"net/http/pprof"
)

// debugRoutes serves Go's profiler (enable_debug = true) on this node,
// behind acl.token (not the read-only token): `go tool pprof http://NODE:7700/debug/pprof/profile`
// with the token in a header (pprof's -http_header, or curl into a file).
func (s *Server) debugRoutes() {
	wrap := func(h http.HandlerFunc) handlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			h(w, r)
			return nil
		}
	}
	s.handle("GET /debug/pprof/", local|manage, wrap(pprof.Index))
	s.handle("GET /debug/pprof/cmdline", local|manage, wrap(pprof.Cmdline))
	s.handle("GET /debug/pprof/profile", local|manage, wrap(pprof.Profile))
	s.handle("GET /debug/pprof/symbol", local|manage, wrap(pprof.Symbol))
	s.handle("GET /debug/pprof/trace", local|manage, wrap(pprof.Trace))
}

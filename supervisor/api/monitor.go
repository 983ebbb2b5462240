package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/supervisor/monitor"
)

// monitorDropReport is how often a stream that dropped lines says so.
const monitorDropReport = time.Second

// monitorLogs streams this node's log lines at ?log_level= (default info;
// trace|debug|info|warn|error), as text or with ?log_json=true as JSON
// lines, until the client goes away. The stream reads from a bounded
// buffer: when the client falls behind, lines are dropped and a line
// "[monitor] dropped N log lines" says how many.
func (s *Server) monitorLogs(w http.ResponseWriter, r *http.Request) error {
	if s.logSinks == nil {
		return errorf(http.StatusNotImplemented, CodeUnavailable, "this server's logger cannot be streamed (it was not started with an intercept logger)")
	}
	level := hclog.Info
	if v := r.URL.Query().Get("log_level"); v != "" {
		level = hclog.LevelFromString(v)
		if level == hclog.NoLevel || strings.EqualFold(v, "off") {
			return badRequest("log_level %q is not one of trace, debug, info, warn, error", v)
		}
	}
	asJSON := false
	if v := r.URL.Query().Get("log_json"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("log_json %q is not true or false", v)
		}
		asJSON = b
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errorf(http.StatusInternalServerError, CodeInternal, "streaming is not supported on this connection")
	}
	stream := monitor.Open(s.logSinks, monitor.Options{Level: level, JSON: asJSON})
	defer stream.Close()
	defer s.metrics.stream(streamMonitor)()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	s.log.Debug("monitor attached", "level", level.String(), "remote", r.RemoteAddr)

	tick := time.NewTicker(monitorDropReport)
	defer tick.Stop()
	var reported uint64
	for {
		select {
		case <-r.Context().Done():
			return nil
		case line := <-stream.Lines():
			if _, err := w.Write(line); err != nil {
				return nil
			}
			// Write what is queued before flushing, so a burst costs one flush.
			for n := len(stream.Lines()); n > 0; n-- {
				if _, err := w.Write(<-stream.Lines()); err != nil {
					return nil
				}
			}
			flusher.Flush()
		case <-tick.C:
			if d := stream.Dropped(); d > reported {
				s.metrics.monitorDropped.Add(float64(d - reported))
				if _, err := fmt.Fprintf(w, "[monitor] dropped %d log lines: this stream fell behind\n", d-reported); err != nil {
					return nil
				}
				reported = d
				flusher.Flush()
			}
		}
	}
}

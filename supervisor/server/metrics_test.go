package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// scrape reads and parses node i's /v1/metrics.
func (c *testCluster) scrape(i int) map[string]*dto.MetricFamily {
	c.t.Helper()
	req, err := http.NewRequest("GET", "http://"+c.servers[i].HTTPAddr()+"/v1/metrics", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if tok := c.cfgs[i].ACL.Token; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /v1/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		c.t.Fatalf("parse /v1/metrics: %v", err)
	}
	return fams
}

// value is the value of the family's series with all the given labels
// (a gauge's or counter's value, a summary's count); ok is false when no
// series has them.
func value(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// busyServer starts one node with a session waiting for input, so that
// every metric family has series.
func busyServer(t *testing.T) (*testCluster, *client.Client) {
	t.Helper()
	c := newTestCluster(t, 1, testToken)
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "metrics"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "session to wait for input", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionWaitingForInput
	}))
	return c, cl
}

// TestMetricsFamilies scrapes a real server running a session and an event
// stream and finds every family the operator's kit promises, with values
// that follow what the server is doing.
func TestMetricsFamilies(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c, cl := busyServer(t)
	events, err := cl.Events(ctx(t), client.EventFilter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()

	want := []struct {
		family string
		labels map[string]string
		check  func(v float64) bool
	}{
		{"paddock_build_info", nil, func(v float64) bool { return v == 1 }},
		{"paddock_sessions", map[string]string{"state": "WAITING_FOR_INPUT"}, func(v float64) bool { return v == 1 }},
		{"paddock_sessions", map[string]string{"state": "ERROR"}, func(v float64) bool { return v == 0 }},
		{"paddock_executors", map[string]string{"runtime": "standalone", "status": "ready"}, func(v float64) bool { return v == 1 }},
		{"paddock_plugin_healthy", map[string]string{"plugin": "standalone"}, func(v float64) bool { return v == 1 }},
		{"paddock_plugin_restarts_total", map[string]string{"plugin": "standalone"}, func(v float64) bool { return v == 0 }},
		{"paddock_streams", map[string]string{"stream": "events"}, func(v float64) bool { return v == 1 }},
		{"paddock_streams", map[string]string{"stream": "terminal"}, func(v float64) bool { return v == 0 }},
		{"paddock_raft_is_leader", nil, func(v float64) bool { return v == 1 }},
		{"paddock_raft_commitTime", nil, func(v float64) bool { return v > 0 }},
		{"paddock_raft_fsm_applyBatch", nil, func(v float64) bool { return v > 0 }},
		{"paddock_raft_fsm_applyBatchNum", nil, func(v float64) bool { return v > 0 }},
		{"paddock_raft_leader_lastContact", nil, func(v float64) bool { return v >= 0 }},
		{"paddock_raft_apply", nil, func(v float64) bool { return v > 0 }},
		{"paddock_raft_log_entries", nil, func(v float64) bool { return v > 0 }},
		{"paddock_raft_log_store_bytes", nil, func(v float64) bool { return v > 0 }},
		{"paddock_raft_last_log_index", nil, func(v float64) bool { return v > 0 }},
		{"paddock_recovery_last_duration_seconds", nil, func(v float64) bool { return v >= 0 }},
		{"paddock_recovery_last_sessions", map[string]string{"outcome": "continued"}, func(v float64) bool { return v >= 0 }},
		{"paddock_http_request_duration_seconds", map[string]string{"route": "POST /v1/tasks/{id}/sessions"}, func(v float64) bool { return v >= 1 }},
	}
	missing := ""
	t.Cleanup(func() {
		if t.Failed() && missing != "" {
			t.Logf("last scrape lacked %s", missing)
		}
	})
	testkit.WaitFor(t, 15*time.Second, "every metric family with its value", testkit.Cond(func() bool {
		fams := c.scrape(0)
		for _, w := range want {
			if v, ok := value(fams[w.family], w.labels); !ok || !w.check(v) {
				missing = fmt.Sprintf("%s%v (found %v, value %v)", w.family, w.labels, ok, v)
				return false
			}
		}
		return true
	}))
	events.Close()
	testkit.WaitFor(t, 10*time.Second, "the closed event stream to be uncounted", testkit.Cond(func() bool {
		v, ok := value(c.scrape(0)["paddock_streams"], map[string]string{"stream": "events"})
		return ok && v == 0
	}))
}

// dashboardPath is the Grafana dashboard shipped in deploy/grafana.
const dashboardPath = "../../deploy/grafana/paddock.json"

// TestGrafanaDashboardNamesExportedMetrics checks that every query of the
// shipped Grafana dashboard (panel targets and template variables) names
// only metrics a real server exports on /v1/metrics: a renamed or dropped
// metric fails here instead of leaving an empty graph.
func TestGrafanaDashboardNamesExportedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s is not a dashboard: %v", dashboardPath, err)
	}
	type query struct{ where, expr string }
	var queries []query
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries = append(queries, query{"panel " + strconv.Quote(p.Title), tg.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			queries = append(queries, query{"variable " + v.Name, q})
		}
	}

	c, _ := busyServer(t)
	fams := c.scrape(0)
	exported := func(name string) bool {
		if _, ok := fams[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if f, ok := fams[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) {
				switch f.GetType() {
				case dto.MetricType_HISTOGRAM:
					return true
				case dto.MetricType_SUMMARY:
					return suffix != "_bucket"
				}
			}
		}
		return false
	}
	checked := 0
	for _, q := range queries {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: query %q names no metric", q.where, q.expr)
		}
		for _, n := range names {
			checked++
			if !exported(n) {
				t.Errorf("%s: query %q names %s, which the server does not export", q.where, q.expr, n)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d metric names checked in %d queries; is the dashboard empty?", checked, len(queries))
	}
}

// promqlWords are PromQL's keywords (never metric names).
var promqlWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "and": true, "or": true, "unless": true, "bool": true, "offset": true,
	// aggregation operators, which may stand apart from their "(": sum by (x) (…)
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true, "stdvar": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true}

// metricNames returns the metric names a PromQL expression (or a Grafana
// label_values(...) query) selects: identifiers outside strings, label
// matchers, range brackets and grouping lists that are not function names
// or keywords.
func metricNames(expr string) []string {
	// label_values(METRIC, LABEL) names a metric and a label; only the
	// metric is looked up.
	if inner, ok := strings.CutPrefix(strings.TrimSpace(expr), "label_values("); ok {
		inner = strings.TrimSuffix(strings.TrimSpace(inner), ")")
		comma := strings.LastIndex(inner, ",")
		if comma < 0 {
			return nil
		}
		expr = inner[:comma]
	}
	var out []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipTo := func(i int, closing byte) int {
		for i < len(expr) && expr[i] != closing {
			if expr[i] == '"' || expr[i] == '\'' {
				q := expr[i]
				for i++; i < len(expr) && expr[i] != q; i++ {
					if expr[i] == '\\' {
						i++
					}
				}
			}
			i++
		}
		return i
	}
	afterGroup := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			i = skipTo(i+1, c) + 1
		case c == '{':
			i = skipTo(i+1, '}') + 1
		case c == '[':
			i = skipTo(i+1, ']') + 1
		case c == '(' && afterGroup:
			i = skipTo(i+1, ')') + 1
			afterGroup = false
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case word == "by" || word == "without" || word == "on" || word == "ignoring" || word == "group_left" || word == "group_right":
				afterGroup = true
			case promqlWords[word], k < len(expr) && expr[k] == '(':
				// a keyword or a function call
			case i > 0 && isPart(expr[i-1]):
				// the unit of a number such as 5m
			default:
				out = append(out, word)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`paddock_raft_is_leader`, []string{"paddock_raft_is_leader"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(paddock_http_request_duration_seconds_bucket[5m])))`, []string{"paddock_http_request_duration_seconds_bucket"}},
		{`paddock_raft_commit_index - paddock_state_applied_index`, []string{"paddock_raft_commit_index", "paddock_state_applied_index"}},
		{`paddock_raft_commitTime{quantile="0.99", x=~"a{b}"}`, []string{"paddock_raft_commitTime"}},
		{`label_values(paddock_build_info, job)`, []string{"paddock_build_info"}},
		{`max by (state) (paddock_sessions) offset 5m`, []string{"paddock_sessions"}},
	} {
		if got := metricNames(tc.expr); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("metricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
)

// minRaftTimeout is the smallest raft timing hashicorp/raft accepts.
const minRaftTimeout = 5 * time.Millisecond

var (
	// namePattern is what node, plugin and agent names must match.
	namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	// templatePattern finds {{…}} placeholders in agent argv elements.
	templatePattern = regexp.MustCompile(`\{\{[^{}]*\}\}`)
	// knownTemplates are the placeholders substituted into agent argv elements.
	knownTemplates = []string{"{{resume_token}}", "{{session_id}}", "{{workspace}}"}
)

// minClusterSecret is the shortest server.cluster_secret accepted.
const minClusterSecret = 16

// validator checks a merged Config; ranges (may be nil) locate each value.
type validator struct {
	ranges map[string]hcl.Range
	diags  hcl.Diagnostics
}

func validate(c *Config, ranges map[string]hcl.Range) hcl.Diagnostics {
	v := &validator{ranges: ranges}
	v.top(c)
	v.server(c)
	v.api(c)
	for _, p := range c.Plugins {
		if !namePattern.MatchString(p.Name) {
			v.fail("plugin."+p.Name, fmt.Sprintf("Invalid plugin name %q", p.Name),
				"A plugin name is the suffix of its binary paddock-runtime-NAME.",
				`use letters, digits, ".", "_" or "-", such as "standalone"`)
		}
	}
	for _, a := range c.Agents {
		v.agent(a)
	}
	v.oneOf("recovery.auto_resume", c.Recovery.AutoResume, []string{AutoResumeAll, AutoResumeActive, AutoResumeNone})
	v.positive("recovery.health_timeout", c.Recovery.HealthTimeout)
	if c.Terminal.Shell != nil && (len(c.Terminal.Shell) == 0 || c.Terminal.Shell[0] == "") {
		v.fail("terminal.shell", "Invalid terminal.shell", "The shell argv is empty.",
			`give a program and its arguments, such as ["/bin/sh", "-l"], or omit shell to use agentctl's $SHELL`)
	}
	if c.Terminal.ReplayBytes < runtime.MinReplayBytes {
		v.fail("terminal.replay_bytes", "Invalid terminal.replay_bytes",
			fmt.Sprintf("terminal.replay_bytes must be at least %d bytes (agentctl's smallest replay buffer), not %d.", runtime.MinReplayBytes, c.Terminal.ReplayBytes),
			`use a size such as "256KiB" or "1MiB"`)
	}
	v.positive("terminal.idle_timeout", c.Terminal.IdleTimeout)
	v.positive("lease.ttl", c.Lease.TTL)
	v.limit("limits.max_sessions_per_node", c.Limits.MaxSessionsPerNode, "the most live sessions one node may run, such as 200")
	v.limit("limits.max_websockets", c.Limits.MaxWebsockets, "the most event streams and terminals one node serves at once, such as 1000")
	v.limit("limits.max_request_rate", c.Limits.MaxRequestRate, "the most requests per second one client may make, such as 100")
	v.acl(c)
	v.tls(c)
	return v.diags
}

// fail adds an error located at key's range, or at the nearest enclosing one recorded.
func (v *validator) fail(key, summary, detail, hint string) {
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: joinHint(detail, hint)}
	for k := key; k != ""; {
		if r, ok := v.ranges[k]; ok {
			d.Subject = r.Ptr()
			break
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	v.diags = append(v.diags, d)
}

// limit checks a cap of the limits block, where 0 means no cap.
func (v *validator) limit(key string, n int, example string) {
	if n < 0 {
		v.fail(key, "Invalid "+key, fmt.Sprintf("%d is negative.", n), "use 0 for no cap, or "+example)
	}
}

func (v *validator) acl(c *Config) {
	switch {
	case c.ACL.ReadToken == "":
	case c.ACL.Token == "":
		v.fail("acl.read_token", "Invalid acl.read_token", "acl.read_token is set but acl.token is not: without acl.token the API is open to everyone, writes included.",
			"set acl.token too, or remove read_token")
	case c.ACL.ReadToken == c.ACL.Token:
		v.fail("acl.read_token", "Invalid acl.read_token", "acl.read_token is the same as acl.token, so it would not be read-only.",
			"give the read-only token its own value, such as the output of: head -c 32 /dev/urandom | base64")
	}
}

func (v *validator) tls(c *Config) {
	t := c.TLS
	if !t.Enabled() {
		for key, on := range map[string]bool{"tls.verify_incoming": t.VerifyIncoming, "tls.verify_server_hostname": t.VerifyServerHostname} {
			if on {
				v.fail(key, "Invalid "+key, key+" is set but TLS is off (no ca_file, cert_file or key_file).",
					"set tls.ca_file, tls.cert_file and tls.key_file (paddock tls ca create, paddock tls cert create -server)")
			}
		}
		return
	}
	for _, f := range []struct{ key, val, what string }{
		{"tls.ca_file", t.CAFile, "the CA certificate (paddock tls ca create writes paddock-ca.pem)"},
		{"tls.cert_file", t.CertFile, "this node's server certificate (paddock tls cert create -server -node " + c.NodeName + ")"},
		{"tls.key_file", t.KeyFile, "this node's server key (written beside its certificate)"},
	} {
		if f.val == "" {
			v.fail(v.setKey("tls.ca_file", "tls.cert_file", "tls.key_file"), "Missing "+f.key, "TLS needs "+f.key+": "+f.what+".", "set ca_file, cert_file and key_file together, or none for plain connections")
		}
	}
}

func (v *validator) oneOf(key, val string, allowed []string) {
	if slices.Contains(allowed, val) {
		return
	}
	v.fail(key, "Invalid "+key, fmt.Sprintf("%q is not one of %s.", val, strings.Join(allowed, ", ")),
		"use one of "+quoteAll(allowed))
}

func (v *validator) nonEmpty(key, val, example string) {
	if strings.TrimSpace(val) == "" {
		v.fail(key, "Invalid "+key, key+" must not be empty.", "use a value such as "+example+" or omit it for the default")
	}
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.fail(key, "Invalid "+key, fmt.Sprintf("%s must be greater than zero, not %s.", key, d), `use a duration such as "300ms", "2s" or "30m"`)
	}
}

func (v *validator) positiveSize(key string, n int64) {
	if n <= 0 {
		v.fail(key, "Invalid "+key, fmt.Sprintf("%s must be greater than zero, not %d.", key, n), `use a size such as "256KiB" or "1MiB"`)
	}
}

func (v *validator) port(key string, p int) {
	if p < 1 || p > 65535 {
		v.fail(key, "Invalid "+key, fmt.Sprintf("Port %d is outside 1..65535.", p), "use a free TCP port between 1 and 65535, such as 7700")
	}
}

func (v *validator) top(c *Config) {
	if !namePattern.MatchString(c.NodeName) {
		v.fail("node_name", "Invalid node_name", fmt.Sprintf("%q is not a valid node name.", c.NodeName),
			`use 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit, such as "n1"`)
	}
	v.nonEmpty("data_dir", c.DataDir, `"./data"`)
	v.nonEmpty("plugin_dir", c.PluginDir, `"./bin/plugins"`)
	if ip := net.ParseIP(c.BindAddr); ip == nil || ip.IsUnspecified() {
		v.fail("bind_addr", "Invalid bind_addr", fmt.Sprintf("%q is not an IP address this node can be reached at.", c.BindAddr),
			`use this node's IP address, such as "127.0.0.1"; 0.0.0.0 and :: cannot be advertised to peers`)
	}
	v.oneOf("log_level", c.LogLevel, logLevels)
	v.port("ports.http", c.Ports.HTTP)
	v.port("ports.raft", c.Ports.Raft)
	if c.Ports.HTTP == c.Ports.Raft {
		key := "ports.raft"
		if _, ok := v.ranges[key]; !ok {
			key = "ports.http"
		}
		v.fail(key, "Duplicate port", fmt.Sprintf("ports.http and ports.raft are both %d.", c.Ports.HTTP),
			"give the HTTP API and raft different ports, such as 7700 and 7701")
	}
}

func (v *validator) server(c *Config) {
	s := c.Server
	if s.ClusterSecret != "" && len(s.ClusterSecret) < minClusterSecret {
		v.fail("server.cluster_secret", "Invalid server.cluster_secret",
			fmt.Sprintf("The cluster secret is %d characters; at least %d are needed.", len(s.ClusterSecret), minClusterSecret),
			"use a long random string, the same on every server, such as the output of: head -c 32 /dev/urandom | base64")
	}
	// With a user token, node-to-node routes need a credential of their
	// own. A single server makes one (server.Start keeps it in data_dir);
	// servers that are to join each other must be given the same one.
	// (A single server with retry_join may still make its own: it then
	// joins only servers given that secret, and says so at start.)
	if c.ACL.Token != "" && s.ClusterSecret == "" && s.BootstrapExpect > 1 {
		v.fail("server.cluster_secret", "Missing server.cluster_secret",
			"A cluster with acl.token needs a node secret of its own, the same on every server: it is never derived from the user token.",
			"set server.cluster_secret to a long random string on every server, such as the output of: head -c 32 /dev/urandom | base64")
	}
	if s.Nice < -20 || s.Nice > 0 {
		v.fail("server.nice", "Invalid server.nice",
			fmt.Sprintf("%d is not a nice value the server can raise itself to.", s.Nice),
			"use -20 to 0: a negative value raises the server's CPU priority above its sessions' agentctls, 0 leaves it alone")
	}
	if s.RaftStore != "" && s.RaftStore != RaftStoreBolt && s.RaftStore != RaftStoreWAL {
		v.fail("server.raft_store", "Invalid server.raft_store",
			fmt.Sprintf("%q is not a raft store.", s.RaftStore),
			`use "bolt" (raft-boltdb, the default for a new data_dir) or "wal" (hashicorp/raft-wal), or omit raft_store to keep the store the data_dir has`)
	}
	if !slices.Contains([]int{1, 3, 5}, s.BootstrapExpect) {
		v.fail("server.bootstrap_expect", "Invalid server.bootstrap_expect",
			fmt.Sprintf("%d is not a supported cluster size.", s.BootstrapExpect),
			"use 1 for a single node, or 3 or 5 for a cluster that survives 1 or 2 failures")
	}
	for i, peer := range s.RetryJoin {
		if !validHostPort(peer) {
			v.fail(fmt.Sprintf("server.retry_join[%d]", i), "Invalid server.retry_join",
				fmt.Sprintf("%q is not a host:port address.", peer),
				`use a peer's HTTP address as host:port, such as "127.0.0.2:7700"`)
		}
	}
	timings := []struct {
		key string
		d   time.Duration
	}{
		{"server.heartbeat_timeout", s.HeartbeatTimeout},
		{"server.election_timeout", s.ElectionTimeout},
		{"server.leader_lease_timeout", s.LeaderLeaseTimeout},
	}
	ok := true
	for _, t := range timings {
		if t.d < minRaftTimeout {
			ok = false
			v.fail(t.key, "Invalid "+t.key, fmt.Sprintf("%s is below raft's minimum of %s.", t.d, minRaftTimeout),
				`use a duration such as "300ms" (raft timings must be at least 5ms)`)
		}
	}
	if !ok {
		return
	}
	if s.LeaderLeaseTimeout > s.HeartbeatTimeout {
		v.fail(v.setKey("server.leader_lease_timeout", "server.heartbeat_timeout"), "Invalid server.leader_lease_timeout",
			fmt.Sprintf("leader_lease_timeout (%s) is larger than heartbeat_timeout (%s); raft rejects that.", s.LeaderLeaseTimeout, s.HeartbeatTimeout),
			"keep leader_lease_timeout at most heartbeat_timeout, such as 150ms with 300ms")
	}
	if s.ElectionTimeout < s.HeartbeatTimeout {
		v.fail(v.setKey("server.election_timeout", "server.heartbeat_timeout"), "Invalid server.election_timeout",
			fmt.Sprintf("election_timeout (%s) is smaller than heartbeat_timeout (%s); raft rejects that.", s.ElectionTimeout, s.HeartbeatTimeout),
			"keep election_timeout at least heartbeat_timeout, such as both 300ms")
	}
}

// setKey returns the first key that was set in a file, else the first key.
func (v *validator) setKey(keys ...string) string {
	for _, k := range keys {
		if _, ok := v.ranges[k]; ok {
			return k
		}
	}
	return keys[0]
}

func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(host, " /") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

func (v *validator) api(c *Config) {
	for i, o := range c.API.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.fail(fmt.Sprintf("api.allowed_origins[%d]", i), "Invalid api.allowed_origins",
				fmt.Sprintf("%q is not a browser origin.", o),
				`use scheme://host[:port] without a path, such as "http://localhost:7700", or "*" for any origin`)
		}
	}
	v.positiveSize("api.max_body", c.API.MaxBody)
}

func (v *validator) agent(a *Agent) {
	key := "agent." + a.Name
	where := fmt.Sprintf("agent %q", a.Name)
	if !namePattern.MatchString(a.Name) {
		v.fail(key, fmt.Sprintf("Invalid agent name %q", a.Name), "Agent names are used in URLs and on the command line.",
			`use letters, digits, ".", "_" or "-", such as "claude-cli"`)
	}
	switch a.Protocol {
	case ProtocolACP, ProtocolPTY:
	case "":
		v.fail(key, "Missing protocol", where+" has no protocol.", `add protocol = "acp" or protocol = "pty"`)
	default:
		v.fail(key+".protocol", "Invalid protocol", fmt.Sprintf("%q is not a protocol of %s.", a.Protocol, where),
			`use "acp" for agents speaking the Agent Client Protocol, or "pty" for terminal programs`)
	}
	if len(a.Command) == 0 || strings.TrimSpace(a.Command[0]) == "" {
		k := key
		if a.Command != nil {
			k = key + ".command"
		}
		v.fail(k, "Missing command", where+" has no command to run.",
			`add command = ["program", "arg"], such as ["paddock-demo-agent"]; the program is looked up on the executor's PATH`)
	}
	v.oneOf(key+".permission", a.Permission, []string{PermissionAsk, PermissionAllow, PermissionDeny})
	kinds := make([]string, len(api.ToolKinds))
	for i, k := range api.ToolKinds {
		kinds[i] = string(k)
	}
	for i, k := range a.AutoAllow {
		if !slices.Contains(kinds, k) {
			v.fail(fmt.Sprintf("%s.auto_allow[%d]", key, i), "Invalid tool kind",
				fmt.Sprintf("%q is not a tool kind (%s auto_allow).", k, where), "the tool kinds are "+quoteAll(kinds))
		}
	}
	if a.PermissionTimeout < 0 {
		v.fail(key+".permission_timeout", "Invalid permission_timeout",
			fmt.Sprintf("%s permission_timeout is negative.", where), `use a positive duration such as "5m", or leave it out to wait for an answer forever`)
	}
	for _, list := range []struct {
		name string
		args []string
	}{{"command", a.Command}, {"new_args", a.NewArgs}, {"resume_args", a.ResumeArgs}} {
		for i, arg := range list.args {
			for _, t := range templatePattern.FindAllString(arg, -1) {
				if !slices.Contains(knownTemplates, t) {
					v.fail(fmt.Sprintf("%s.%s[%d]", key, list.name, i), "Unknown template",
						fmt.Sprintf("%s %s contains %s.", where, list.name, t),
						"the templates are "+strings.Join(knownTemplates, ", "))
				}
			}
		}
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

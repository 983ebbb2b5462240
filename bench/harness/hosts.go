package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// HostSpec places one node of StartHosts.
type HostSpec struct {
	// IP is the node's bind address.
	IP string
	// HTTPPort and RaftPort default to 7480 and 7481 (each host has its
	// own address, so the same ports are free on every one).
	HTTPPort, RaftPort int
	// Wrap, when set, is argv that runs the paddock command, e.g.
	// `ip netns exec NS`; it must exec the program (keep the pid).
	Wrap []string
	// Extra is HCL appended to this node's config (after Options.Extra).
	Extra string
}

// StartHosts writes one config per host (each joining the others) and
// starts the nodes; Options.Size and SeparateIPs are ignored (ServerExtra
// goes into every server block, as with Start).
func StartHosts(o Options, hosts []HostSpec) (*Cluster, error) {
	if len(hosts) == 0 {
		return nil, errors.New("harness: no hosts")
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	for i := range hosts {
		if hosts[i].HTTPPort == 0 {
			hosts[i].HTTPPort = 7480
		}
		if hosts[i].RaftPort == 0 {
			hosts[i].RaftPort = 7481
		}
	}
	secret := randomSecret() // the servers' shared server.cluster_secret
	c := &Cluster{}
	for i, h := range hosts {
		var join []string
		for j, o := range hosts {
			if j != i {
				join = append(join, fmt.Sprintf("%q", fmt.Sprintf("%s:%d", o.IP, o.HTTPPort)))
			}
		}
		name := fmt.Sprintf("node%d", i+1)
		dir := filepath.Join(o.Dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		cfg := fmt.Sprintf(`node_name = %q
data_dir  = "./data"
bind_addr = %q
log_level = %q
ports {
  http = %d
  raft = %d
}
server {
  bootstrap_expect = %d
  retry_join       = [%s]
  cluster_secret   = %q
%s
}
%s
%s
`, name, h.IP, o.LogLevel, h.HTTPPort, h.RaftPort, len(hosts), strings.Join(join, ", "), secret, o.ServerExtra, o.Extra, h.Extra)
		path := filepath.Join(dir, "config.hcl")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		bin := o.Bin
		if len(h.Wrap) > 0 {
			var err error
			if bin, err = wrapBin(dir, o.Bin, h.Wrap); err != nil {
				return nil, err
			}
		}
		c.Nodes = append(c.Nodes, &Node{Name: name, Dir: dir, Config: path, HTTP: fmt.Sprintf("%s:%d", h.IP, h.HTTPPort), Token: o.Token, bin: bin})
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// wrapBin writes dir/bin/paddock, a script that execs wrap + the real
// paddock with its arguments (so the node's pid is the server's).
func wrapBin(dir, realBin string, wrap []string) (string, error) {
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return "", err
	}
	var q []string
	for _, a := range append(append([]string{}, wrap...), filepath.Join(realBin, "paddock")) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := "#!/bin/sh\nexec " + strings.Join(q, " ") + ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(bin, "paddock"), []byte(script), 0o700); err != nil {
		return "", err
	}
	return bin, nil
}

// Signal sends sig to the running server process (e.g. SIGSTOP, SIGCONT).
func (n *Node) Signal(sig syscall.Signal) error {
	if !n.Running() {
		return fmt.Errorf("%s is not running", n.Name)
	}
	return syscall.Kill(n.PID(), sig)
}

package remoteexec

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
)

// Config is the remote plugin's `config { … }` body.
type Config struct {
	// Hosts are the agentctl host daemons, in declaration order (the first
	// healthy one is the default for a launch).
	Hosts []Host
	// Reconnect is the backoff policy of Recover.
	Reconnect Reconnect
}

// Host is one `host "name" { url, secret_file }` block.
type Host struct {
	Name       string
	URL        string
	SecretFile string
	// Fingerprint pins the host daemon's certificate (agentctl host -tls
	// prints it); it needs an https URL.
	Fingerprint string
	// Secret is read from SecretFile at configuration time; never logged.
	Secret string
}

// Reconnect is the `reconnect { … }` block: Recover health-checks an
// executor up to Attempts times, waiting Initial after the first failure,
// doubling up to Max between later ones. Timeout bounds each health check.
type Reconnect struct {
	Initial  time.Duration
	Max      time.Duration
	Attempts int
	Timeout  time.Duration
}

// DefaultReconnect is used when the config has no reconnect block (or leaves
// some of its attributes out).
var DefaultReconnect = Reconnect{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Attempts: 10, Timeout: 2 * time.Second}

// host looks a host up by name.
func (c Config) host(name string) (Host, bool) {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// hostSpec is a `host "name" { … }` block.
var hostSpec = configspec.Spec[Host]{
	Attributes: []configspec.Attribute[Host]{
		configspec.Required(configspec.String("url", "base URL of the host API, http:// or https://, e.g. http://10.0.0.5:7800",
			func(h *Host) *string { return &h.URL }, validURL)),
		configspec.String("fingerprint", "SHA-256 (hex) of the host daemon's certificate, printed by `agentctl host -tls`; with it the https url accepts only that certificate (without it, an https url is verified against the system's roots)",
			func(h *Host) *string { return &h.Fingerprint }, fingerprintHex),
		configspec.Required(configspec.Path("secret_file", "file holding the host API secret (read at configuration time)",
			func(h *Host) *string { return &h.SecretFile })),
	},
	Checks: []configspec.Check[Host]{{Attr: "secret_file", Fn: func(h *Host) (err error) {
		h.Secret, err = readSecretFile(h.SecretFile)
		return err
	}}, {Attr: "fingerprint", Fn: func(h *Host) error {
		if h.Fingerprint != "" && !strings.HasPrefix(h.URL, "https://") {
			return fmt.Errorf("a fingerprint needs an https url (run agentctl host with -tls)")
		}
		return nil
	}}},
}

// fingerprintHex checks a SHA-256 fingerprint: 64 hex digits (any case,
// colons allowed as in openssl's output); it is kept lower-case without them.
func fingerprintHex(s string) (string, error) {
	fp := strings.ToLower(strings.ReplaceAll(s, ":", ""))
	if _, err := hex.DecodeString(fp); err != nil || len(fp) != 64 {
		return s, fmt.Errorf("fingerprint must be a SHA-256 in hex (64 digits)")
	}
	return fp, nil
}

// reconnectSpec is the `reconnect { … }` block.
var reconnectSpec = configspec.Spec[Reconnect]{
	Attributes: []configspec.Attribute[Reconnect]{
		configspec.Duration("initial", "wait after the first failed check (default 200ms)", func(r *Reconnect) *time.Duration { return &r.Initial }),
		configspec.Duration("max", "longest wait between checks (default 5s)", func(r *Reconnect) *time.Duration { return &r.Max }),
		configspec.Int("attempts", "health checks before giving up (default 10)", 1, 1000, func(r *Reconnect) *int { return &r.Attempts }),
		configspec.Duration("timeout", "bound of each health check (default 2s)", func(r *Reconnect) *time.Duration { return &r.Timeout }),
	},
	Checks: []configspec.Check[Reconnect]{{Attr: "max", Fn: func(r *Reconnect) error {
		if r.Max < r.Initial {
			return fmt.Errorf("max (%s) must not be shorter than initial (%s)", r.Max, r.Initial)
		}
		return nil
	}}},
}

// spec declares the config body: its decoder and its documentation.
var spec = configspec.Spec[Config]{
	Blocks: []configspec.BlockSpec[Config]{
		configspec.Blocks("host", "name", "an agentctl host daemon (one or more; the first healthy one is the default, runtime_options.host picks one by name)",
			hostSpec, hostName, func(c *Config, name string, h Host) { h.Name = name; c.Hosts = append(c.Hosts, h) }),
		configspec.Block("reconnect", "backoff of recover's health checks", reconnectSpec, func(c *Config) *Reconnect { return &c.Reconnect }),
	},
	Checks: []configspec.Check[Config]{{Summary: "Missing host block", Fn: func(c *Config) error {
		if len(c.Hosts) == 0 {
			return fmt.Errorf(`the remote runtime needs at least one host "name" { url = "http://…"  secret_file = "…" } block`)
		}
		return nil
	}}},
}

func defaults() Config { return Config{Reconnect: DefaultReconnect} }

// ParseConfig parses a config body; diagnostics carry ranges in src.Filename.
// It reads every host's secret_file.
func ParseConfig(src runtime.ConfigSource) (Config, hcl.Diagnostics) {
	return spec.Parse(src, defaults())
}

func hostName(name string) error {
	if !runtime.ValidID(name) {
		return fmt.Errorf("host name %q must be letters, digits, '.', '_' or '-' (at most 128)", name)
	}
	return nil
}

// validURL accepts http(s)://host[:port][/] and returns it without a
// trailing slash.
func validURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q must start with http:// or https://", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", fmt.Errorf("%q must be only scheme://host[:port]", s)
	}
	return strings.TrimRight(s, "/"), nil
}

func readSecretFile(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("secret_file is empty")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %v", path, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

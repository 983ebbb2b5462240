package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/certs"
)

// tlsDir runs `paddock tls ca create` and the cert commands of args in a new
// directory and returns it.
func tlsDir(t *testing.T, certArgs ...[]string) string {
	t.Helper()
	dir := t.TempDir()
	if code, _, stderr := runCLI("", "tls", "ca", "create", "-dir", dir); code != 0 {
		t.Fatalf("tls ca create: %s", stderr)
	}
	for _, a := range certArgs {
		args := append([]string{"tls", "cert", "create", "-dir", dir, "-ca", filepath.Join(dir, caCertFile), "-key", filepath.Join(dir, caKeyFile)}, a...)
		if code, _, stderr := runCLI("", args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	return dir
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSCreateWritesACAAndItsCertificates(t *testing.T) {
	dir := tlsDir(t, []string{"-server", "-node", "n1", "-additional-ipaddress", "10.0.0.5", "-additional-dnsname", "n1.example"},
		[]string{"-client"}, []string{"-client"})
	ca := readCert(t, filepath.Join(dir, caCertFile))
	if !ca.IsCA {
		t.Fatal("paddock-ca.pem is not a CA")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := readCert(t, filepath.Join(dir, "paddock-server-n1.pem"))
	if _, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.5"}); err != nil {
		t.Fatalf("server certificate: %v", err)
	}
	if certs.NodeOf(srv) != "n1" || srv.VerifyHostname("n1.example") != nil {
		t.Fatalf("server certificate names %v %v", srv.DNSNames, srv.IPAddresses)
	}
	for _, name := range []string{"paddock-client-0.pem", "paddock-client-1.pem"} {
		c := readCert(t, filepath.Join(dir, name))
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || certs.NodeOf(c) != "" {
			t.Fatalf("%s: %v, node %q", name, err, certs.NodeOf(c))
		}
	}
	for _, key := range []string{caKeyFile, "paddock-server-n1-key.pem", "paddock-client-0-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, key))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v (%v), want 0600", key, st.Mode().Perm(), err)
		}
	}
}

func TestTLSCreateRefusesBadInput(t *testing.T) {
	dir := tlsDir(t, []string{"-server", "-node", "n1"})
	ca, key := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	before, _ := os.ReadFile(ca)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a second CA over the first", []string{"tls", "ca", "create", "-dir", dir}, "already exists"},
		{"the same server again", []string{"tls", "cert", "create", "-server", "-node", "n1", "-dir", dir, "-ca", ca, "-key", key}, "already exists"},
		{"neither kind", []string{"tls", "cert", "create", "-dir", dir, "-ca", ca, "-key", key}, "give one of -server and -client"},
		{"both kinds", []string{"tls", "cert", "create", "-server", "-client", "-node", "n2", "-dir", dir, "-ca", ca, "-key", key}, "give one of -server and -client"},
		{"a server without its node", []string{"tls", "cert", "create", "-server", "-dir", dir, "-ca", ca, "-key", key}, "-server needs -node NAME"},
		{"a bad node name", []string{"tls", "cert", "create", "-server", "-node", "a/b", "-dir", dir, "-ca", ca, "-key", key}, `node name "a/b"`},
		{"a bad IP", []string{"tls", "cert", "create", "-server", "-node", "n2", "-additional-ipaddress", "10.0.0", "-dir", dir, "-ca", ca, "-key", key}, "not an IP address"},
		{"names on a client", []string{"tls", "cert", "create", "-client", "-node", "n2", "-dir", dir, "-ca", ca, "-key", key}, "are for -server certificates"},
		{"no CA", []string{"tls", "cert", "create", "-client", "-dir", dir, "-ca", filepath.Join(dir, "nope.pem"), "-key", key}, "paddock tls ca create"},
		{"a certificate as the CA", []string{"tls", "cert", "create", "-client", "-dir", dir, "-ca", filepath.Join(dir, "paddock-server-n1.pem"), "-key", key}, "not a CA certificate"},
		{"the wrong key", []string{"tls", "cert", "create", "-client", "-dir", dir, "-ca", ca, "-key", filepath.Join(dir, "paddock-server-n1-key.pem")}, "does not belong to the CA"},
		{"zero days", []string{"tls", "ca", "create", "-days", "0", "-dir", t.TempDir()}, "-days must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI("", tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want an error containing %q", code, stderr, tc.want)
			}
		})
	}
	if after, _ := os.ReadFile(ca); string(after) != string(before) {
		t.Fatal("the CA was overwritten")
	}
	if _, err := os.Stat(filepath.Join(dir, "paddock-server-n2.pem")); err == nil {
		t.Fatal("a refused certificate was written")
	}
}

// TestCLIVerifiesTheServersCertificate: over https the CLI trusts -ca-cert
// (or PADDOCK_CACERT), refuses a server certificate it cannot verify, and
// presents -client-cert to a server that asks for one.
func TestCLIVerifiesTheServersCertificate(t *testing.T) {
	dir := tlsDir(t, []string{"-server", "-node", "n1"}, []string{"-client"})
	other := tlsDir(t)
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, "paddock-server-n1.pem"), filepath.Join(dir, "paddock-server-n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(dir, caCertFile)))
	f := &fakeAPI{routes: defaultRoutes()}
	srv := httptest.NewUnstartedServer(f)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(dir, caCertFile)
	clientFlags := []string{"-client-cert", filepath.Join(dir, "paddock-client-0.pem"), "-client-key", filepath.Join(dir, "paddock-client-0-key.pem")}

	if code, stdout, stderr := runCLI(srv.URL, append([]string{"-ca-cert", ca, "task", "list"}, clientFlags...)...); code != 0 || !strings.Contains(stdout, "fix bug") {
		t.Fatalf("task list over https: exit %d, %s %s", code, stdout, stderr)
	}
	var out, errb strings.Builder
	env := map[string]string{EnvAddress: srv.URL, EnvToken: "tok", EnvCACert: ca,
		EnvClientCert: filepath.Join(dir, "paddock-client-0.pem"), EnvClientKey: filepath.Join(dir, "paddock-client-0-key.pem")}
	if code := run([]string{"task", "list"}, &out, &errb, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("task list with the TLS environment: %s", errb.String())
	}

	refused := []struct {
		name string
		args []string
		want string
	}{
		{"no CA: the system's roots", append([]string{"task", "list"}, clientFlags...), "certificate"},
		{"another CA", append([]string{"-ca-cert", filepath.Join(other, caCertFile), "task", "list"}, clientFlags...), "certificate"},
		{"no client certificate", []string{"-ca-cert", ca, "task", "list"}, ""},
		{"a certificate without its key", []string{"-ca-cert", ca, "-client-cert", clientFlags[1], "task", "list"}, "needs both"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			n := len(f.requests())
			code, _, stderr := runCLI(srv.URL, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want a refusal containing %q", code, stderr, tc.want)
			}
			if len(f.requests()) != n {
				t.Fatal("the request reached the server")
			}
		})
	}
}

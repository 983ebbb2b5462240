package harness

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The files of a TLS cluster, as `paddock tls` names them in Options.TLSDir:
// paddock-ca.pem, paddock-server-NODE.pem (and -key.pem) for each node, and
// paddock-client-0.pem (and -key.pem) for the harness and its tests.

// tlsBlock is the tls block of node (nothing without a TLS directory).
func tlsBlock(dir, node string) string {
	if dir == "" {
		return ""
	}
	return fmt.Sprintf(`tls {
  ca_file                = %q
  cert_file              = %q
  key_file               = %q
  verify_incoming        = true
  verify_server_hostname = true
}
`, filepath.Join(dir, "paddock-ca.pem"), filepath.Join(dir, "paddock-server-"+node+".pem"), filepath.Join(dir, "paddock-server-"+node+"-key.pem"))
}

// clientTLS trusts the cluster's CA and presents its first client certificate.
func clientTLS(dir string) (*tls.Config, error) {
	ca, err := os.ReadFile(filepath.Join(dir, "paddock-ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/paddock-ca.pem holds no certificate", dir)
	}
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, "paddock-client-0.pem"), filepath.Join(dir, "paddock-client-0-key.pem"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}}, nil
}

// quick is the client of the harness's own short reads of n.
func (n *Node) quick() *http.Client {
	if n.TLS == nil {
		return quick
	}
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: n.TLS, DisableKeepAlives: true}}
}

// GetJSON decodes the answer of a GET of path on n (with the harness's token
// and, for a TLS cluster, its client certificate).
func (n *Node) GetJSON(path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, n.URL()+path, nil)
	if err != nil {
		return err
	}
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	resp, err := n.quick().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", n.URL()+path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

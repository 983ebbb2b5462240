package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// TLSOptions say how a Client talks to an HTTPS API.
type TLSOptions struct {
	// CACert is a PEM file of the CA that signed the servers' certificates
	// (the cluster's tls.ca_file); "" trusts the system's roots.
	CACert string
	// ClientCert and ClientKey are a client certificate and its key, for a
	// server with tls.verify_incoming; both or neither.
	ClientCert string
	ClientKey  string
}

// TLSConfig builds the TLS configuration of opts. The server's certificate
// is always verified, its names against the address's host.
func TLSConfig(opts TLSOptions) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CACert != "" {
		b, err := os.ReadFile(opts.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate in it", opts.CACert)
		}
		c.RootCAs = pool
	}
	switch {
	case opts.ClientCert != "" && opts.ClientKey != "":
		kp, err := tls.LoadX509KeyPair(opts.ClientCert, opts.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s with key %s: %w", opts.ClientCert, opts.ClientKey, err)
		}
		c.Certificates = []tls.Certificate{kp}
	case opts.ClientCert != "" || opts.ClientKey != "":
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	return c, nil
}

// WithTLS makes the Client use tc for HTTPS and WSS connections (see
// TLSConfig). It replaces the HTTP client of an earlier WithHTTPClient.
func WithTLS(tc *tls.Config) Option {
	return func(c *Client) {
		if tc != nil {
			c.http = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tc, ForceAttemptHTTP2: true}}
		}
	}
}

// TLS returns the TLS configuration the Client's HTTP transport uses, or nil
// (the default), for callers that open their own WebSockets.
func (c *Client) TLS() *tls.Config {
	if tr, ok := c.http.Transport.(*http.Transport); ok {
		return tr.TLSClientConfig
	}
	return nil
}

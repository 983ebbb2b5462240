package agentctl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"
)

// An agentctl serving TLS (serve -tls) makes its own key at every start: an
// ECDSA P-256 key and a self-signed certificate. There is no CA inside an
// executor; a client instead pins the certificate's fingerprint, which
// agentctl reports in its info (Info.Fingerprint) and the supervisor records
// with the executor.

// Fingerprint is the SHA-256 of a certificate's DER, lower-case hex.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// NewIdentity makes a fresh ECDSA P-256 key and a self-signed certificate
// for it (valid from an hour ago for ten years: it lives as long as the
// process), and returns it with its fingerprint.
func NewIdentity(commonName string) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, Fingerprint(der), nil
}

// ErrFingerprint is returned when the peer's certificate is not the pinned one.
var ErrFingerprint = errors.New("agentctl certificate does not match the pinned fingerprint")

// PinnedTLS is a client tls.Config that accepts exactly the certificate
// whose fingerprint is given: chain and host name are not verified (the
// certificate is self-signed), the fingerprint is, on every connection,
// resumed ones included.
func PinnedTLS(fingerprint string) *tls.Config {
	want := []byte(strings.ToLower(fingerprint))
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the fingerprint check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrFingerprint
			}
			got := Fingerprint(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
				return fmt.Errorf("%w: got %s, want %s", ErrFingerprint, got, want)
			}
			return nil
		},
	}
}

// pinnedTransports holds one transport per pinned fingerprint (one per
// agentctl start), sharing the pool settings of the plain one.
var pinnedTransports sync.Map // fingerprint → *http.Transport

func transportFor(fingerprint string) *http.Transport {
	if fingerprint == "" {
		return transport
	}
	if t, ok := pinnedTransports.Load(fingerprint); ok {
		return t.(*http.Transport)
	}
	t := transport.Clone()
	t.TLSClientConfig = PinnedTLS(fingerprint)
	t.ForceAttemptHTTP2 = false
	actual, _ := pinnedTransports.LoadOrStore(fingerprint, t)
	return actual.(*http.Transport)
}

// NewPinnedClient is NewClient for an agentctl serving TLS (an https URL)
// whose certificate has the given fingerprint; any other certificate, a
// man in the middle's included, is refused before a request is sent.
func NewPinnedClient(baseURL, secret, fingerprint string, timeout time.Duration) *Client {
	c := NewClient(baseURL, secret, timeout)
	c.hc = &http.Client{Transport: transportFor(fingerprint)}
	return c
}

// Package pin gives agentctl a TLS identity of its own and lets clients pin
// it: agentctl serve -tls makes an ECDSA P-256 key and a self-signed
// certificate at every start, and reports the certificate's fingerprint;
// there is no CA inside an executor. Clients (the supervisor, runtimes)
// accept exactly the certificate whose fingerprint was recorded.
//
// This package must not import agentctl or anything under supervisor/.
package pin

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
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"
)

// Fingerprint is the SHA-256 of a certificate's DER, lower-case hex.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// New makes a fresh ECDSA P-256 key and a self-signed certificate
// for it (valid from an hour ago for ten years: it lives as long as the
// process), and returns it with its fingerprint.
func New(commonName string) (tls.Certificate, string, error) {
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

// ClientConfig is a client tls.Config that accepts exactly the certificate
// whose fingerprint is given: chain and host name are not verified (the
// certificate is self-signed), the fingerprint is, on every connection,
// resumed ones included.
func ClientConfig(fingerprint string) *tls.Config {
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

// LoadOrNew reads the identity kept in certFile and keyFile (PEM), or makes
// one with New and keeps it there (0600) when neither exists: a daemon
// whose fingerprint is configured elsewhere (agentctl host) keeps it across
// restarts.
func LoadOrNew(certFile, keyFile, commonName string) (tls.Certificate, string, error) {
	if _, err := os.Stat(certFile); err == nil {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
		}
		return cert, Fingerprint(cert.Certificate[0]), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	cert, fp, err := New(commonName)
	if err != nil {
		return cert, fp, err
	}
	der, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("agentctl identity: %w", err)
	}
	return cert, fp, nil
}

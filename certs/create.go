package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"regexp"
	"strings"
	"time"
)

// Lifetimes of what `paddock tls` creates unless told otherwise (Consul's).
const (
	DefaultCADays   = 5 * 365
	DefaultCertDays = 365
)

// Domain is the name suffix of every identity a Paddock certificate carries.
const Domain = "paddock"

// ClientName is the identity of a client certificate.
const ClientName = "client." + Domain

// ServerName is the identity of node's server certificate.
func ServerName(node string) string { return "server." + node + "." + Domain }

// serverNamePattern matches a server identity and captures its node name
// (node names are config.namePattern: letters, digits, ".", "_", "-").
var serverNamePattern = regexp.MustCompile(`^server\.([A-Za-z0-9][A-Za-z0-9._-]{0,63})\.` + Domain + `$`)

// ErrInvalid means a certificate or key cannot be used.
var ErrInvalid = errors.New("invalid certificate")

// PEM is a certificate and its private key, PEM-encoded.
type PEM struct {
	Cert []byte
	Key  []byte
}

// CA is a certificate authority that signs certificates.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// CAOptions configure NewCA.
type CAOptions struct {
	// Days is the CA's lifetime (DefaultCADays when 0).
	Days int
	// Now is the start of its validity (time.Now when zero).
	Now time.Time
}

// NewCA creates a self-signed CA.
func NewCA(opts CAOptions) (PEM, error) {
	now, days := start(opts.Now), orDefault(opts.Days, DefaultCADays)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return PEM{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("Paddock CA %x", serial.Bytes()[:4]), Organization: []string{"Paddock"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Duration(days) * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return PEM{}, fmt.Errorf("create CA certificate: %w", err)
	}
	return encode(der, key)
}

// LoadCA reads a CA's certificate and key (as NewCA wrote them).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%w: %q is not a CA certificate", ErrInvalid, cert.Subject.CommonName)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%w: the CA key does not belong to the CA certificate", ErrInvalid)
	}
	return &CA{cert: cert, key: key, pem: certPEM}, nil
}

// CertOptions describe a certificate for CA.Sign.
type CertOptions struct {
	// Server makes a server certificate for Node; else a client certificate.
	Server bool
	// Node is the server's node name (node_name); required for a server.
	Node string
	// DNSNames and IPs are added to a server certificate's names, beside
	// ServerName(Node), "localhost" and 127.0.0.1: the names clients reach
	// the node's HTTP API by.
	DNSNames []string
	IPs      []net.IP
	// Days is the lifetime (DefaultCertDays when 0), never past the CA's.
	Days int
	// Now is the start of its validity (time.Now when zero).
	Now time.Time
}

// Sign creates a key and a certificate for it signed by the CA.
func (ca *CA) Sign(opts CertOptions) (PEM, error) {
	now, days := start(opts.Now), orDefault(opts.Days, DefaultCertDays)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return PEM{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		NotBefore:      now.Add(-time.Minute),
		NotAfter:       now.Add(time.Duration(days) * 24 * time.Hour),
		KeyUsage:       x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		SubjectKeyId:   keyID(&key.PublicKey),
		AuthorityKeyId: ca.cert.SubjectKeyId,
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	if opts.Server {
		if !serverNamePattern.MatchString(ServerName(opts.Node)) {
			return PEM{}, fmt.Errorf("%w: node name %q: use the server's node_name (letters, digits, \".\", \"_\", \"-\")", ErrInvalid, opts.Node)
		}
		name := ServerName(opts.Node)
		tmpl.Subject = pkix.Name{CommonName: name}
		tmpl.DNSNames = append([]string{name, "localhost"}, opts.DNSNames...)
		tmpl.IPAddresses = append([]net.IP{net.IPv4(127, 0, 0, 1)}, opts.IPs...)
		// A server serves (its API, raft) and dials its peers.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.Subject = pkix.Name{CommonName: ClientName}
		tmpl.DNSNames = []string{ClientName}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return PEM{}, fmt.Errorf("sign certificate: %w", err)
	}
	return encode(der, key)
}

// NodeOf returns the node a verified certificate names as a server, or ""
// when it is not a server certificate.
func NodeOf(cert *x509.Certificate) string {
	for _, n := range cert.DNSNames {
		if m := serverNamePattern.FindStringSubmatch(n); m != nil {
			return m[1]
		}
	}
	return ""
}

// Fingerprint is the SHA-256 of a certificate's DER bytes, hex with colons
// (as `openssl x509 -fingerprint -sha256` prints it, in lower case).
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}

func start(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil // never zero
}

func keyID(pub *ecdsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	return sum[:20]
}

func encode(der []byte, key *ecdsa.PrivateKey) (PEM, error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return PEM{}, fmt.Errorf("encode key: %w", err)
	}
	return PEM{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE block", ErrInvalid)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return cert, nil
}

func parseKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM private key block", ErrInvalid)
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: private key: %v", ErrInvalid, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: private key of type %T cannot sign", ErrInvalid, k)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/certs"
)

// `paddock tls`, as `consul tls`: a CA and the certificates it signs, written
// as PEM files in the current directory (or -dir). Nothing talks to a server.

// File names of what `paddock tls` writes.
const (
	caCertFile = "paddock-ca.pem"
	caKeyFile  = "paddock-ca-key.pem"
)

var tlsCACreateCommand = command{
	path:    "tls ca create",
	args:    "[-days N] [-dir DIR]",
	summary: "create the cluster's certificate authority (" + caCertFile + ", " + caKeyFile + ")",
	bind:    withFlags(tlsCACreateFlags, runTLSCACreate),
}

var tlsCertCreateCommand = command{
	path:    "tls cert create",
	args:    "-server -node NAME | -client [-ca FILE] [-key FILE] [-days N] [-additional-dnsname N]… [-additional-ipaddress IP]… [-dir DIR]",
	summary: "create a server certificate for node NAME, or a client certificate, signed by the CA",
	bind:    withFlags(tlsCertCreateFlags, runTLSCertCreate),
}

type tlsCAOpts struct {
	days *int
	dir  *string
}

func tlsCACreateFlags(fs *flag.FlagSet) *tlsCAOpts {
	return &tlsCAOpts{
		days: fs.Int("days", certs.DefaultCADays, "days the CA is valid"),
		dir:  fs.String("dir", ".", "directory to write the files in"),
	}
}

func runTLSCACreate(e *env, o *tlsCAOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	if *o.days <= 0 {
		return &usageError{msg: fmt.Sprintf("-days must be positive, not %d", *o.days)}
	}
	p, err := certs.NewCA(certs.CAOptions{Days: *o.days})
	if err != nil {
		return err
	}
	return e.savePair(*o.dir, caCertFile, caKeyFile, p)
}

type tlsCertOpts struct {
	server, client *bool
	node           *string
	ca, key        *string
	days           *int
	dnsNames, ips  *listFlag
	dir            *string
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

func tlsCertCreateFlags(fs *flag.FlagSet) *tlsCertOpts {
	o := &tlsCertOpts{
		server:   fs.Bool("server", false, "create a server certificate (for -node)"),
		client:   fs.Bool("client", false, "create a client certificate"),
		node:     fs.String("node", "", "the server's node_name (with -server)"),
		ca:       fs.String("ca", caCertFile, "the CA certificate"),
		key:      fs.String("key", caKeyFile, "the CA key"),
		days:     fs.Int("days", certs.DefaultCertDays, "days the certificate is valid (never past the CA)"),
		dnsNames: &listFlag{},
		ips:      &listFlag{},
		dir:      fs.String("dir", ".", "directory to write the files in"),
	}
	fs.Var(o.dnsNames, "additional-dnsname", "another DNS name clients reach the server by (repeatable; with -server)")
	fs.Var(o.ips, "additional-ipaddress", "another IP address clients reach the server at (repeatable; with -server)")
	return o
}

func runTLSCertCreate(e *env, o *tlsCertOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	if *o.server == *o.client {
		return &usageError{msg: "give one of -server and -client"}
	}
	if *o.days <= 0 {
		return &usageError{msg: fmt.Sprintf("-days must be positive, not %d", *o.days)}
	}
	opts := certs.CertOptions{Server: *o.server, Node: *o.node, DNSNames: *o.dnsNames, Days: *o.days}
	switch {
	case *o.server && *o.node == "":
		return &usageError{msg: "-server needs -node NAME, the server's node_name"}
	case *o.client && (*o.node != "" || len(*o.dnsNames) > 0 || len(*o.ips) > 0):
		return &usageError{msg: "-node, -additional-dnsname and -additional-ipaddress are for -server certificates"}
	}
	for _, s := range *o.ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return &usageError{msg: fmt.Sprintf("-additional-ipaddress %q is not an IP address", s)}
		}
		opts.IPs = append(opts.IPs, ip)
	}
	caPEM, err := os.ReadFile(*o.ca)
	if err != nil {
		return fmt.Errorf("read the CA certificate: %w (create one with: paddock tls ca create)", err)
	}
	keyPEM, err := os.ReadFile(*o.key)
	if err != nil {
		return fmt.Errorf("read the CA key: %w", err)
	}
	ca, err := certs.LoadCA(caPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s with %s: %w", *o.ca, *o.key, err)
	}
	p, err := ca.Sign(opts)
	if err != nil {
		return err
	}
	if *o.server {
		base := "paddock-server-" + *o.node
		return e.savePair(*o.dir, base+".pem", base+"-key.pem", p)
	}
	// Client certificates are numbered: the first free name.
	for i := 0; ; i++ {
		base := fmt.Sprintf("paddock-client-%d", i)
		if _, err := os.Stat(filepath.Join(*o.dir, base+".pem")); errors.Is(err, fs.ErrNotExist) {
			return e.savePair(*o.dir, base+".pem", base+"-key.pem", p)
		}
	}
}

// savePair writes a certificate (0644) and its key (0600) into dir, never
// over an existing file.
func (e *env) savePair(dir, certName, keyName string, p certs.PEM) error {
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	for _, path := range []string{certPath, keyPath} {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s already exists; remove it or write elsewhere with -dir", path)
		}
	}
	if err := writeNew(keyPath, p.Key, 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, p.Cert, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return err
	}
	fmt.Fprintf(e.stdout, "==> Saved %s\n==> Saved %s\n", certPath, keyPath)
	return nil
}

// writeNew creates path (failing if it exists) with data and mode.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

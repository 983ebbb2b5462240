package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/supervisor/config"
)

// clusterSecretFile is where a server that was given no
// server.cluster_secret keeps the one it made, in its data dir.
const clusterSecretFile = "cluster-secret"

// ensureClusterSecret gives a server with acl.token and no
// server.cluster_secret a random node secret of its own, made once and kept
// in data_dir/cluster-secret (0600), so node-to-node routes never take a
// credential derived from the user token. Validate refuses such a config
// for servers that are to join others: they must share a configured secret
// (an operator growing a single server into a cluster copies this file's
// contents into every server's server.cluster_secret).
func ensureClusterSecret(cfg *config.Config) (made bool, err error) {
	if cfg.ACL.Token == "" || cfg.Server.ClusterSecret != "" {
		return false, nil
	}
	path := filepath.Join(cfg.DataDir, clusterSecretFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		secret := strings.TrimSpace(string(data))
		if len(secret) < 16 {
			return false, fmt.Errorf("cluster secret %s is too short (%d characters); remove it to make a new one", path, len(secret))
		}
		cfg.Server.ClusterSecret = secret
		return true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("read cluster secret: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return false, fmt.Errorf("make a cluster secret: %w", err)
	}
	secret := hex.EncodeToString(b)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return false, fmt.Errorf("make a cluster secret: %w", err)
	}
	// O_EXCL: two servers started on one data dir cannot both write one.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("write cluster secret: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return false, fmt.Errorf("write cluster secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("write cluster secret: %w", err)
	}
	cfg.Server.ClusterSecret = secret
	return true, nil
}

// warnMadeSecret says, for a server that made its own node secret and is
// to join others, why such a join fails.
func warnMadeSecret(cfg *config.Config, made bool, log hclog.Logger) {
	if made && len(cfg.Server.RetryJoin) > 0 {
		log.Warn("server.retry_join is set but server.cluster_secret is not: this server made its own node secret ("+
			clusterSecretFile+" in its data_dir) and can join only servers given that secret; set the same server.cluster_secret on every server",
			"retry_join", cfg.Server.RetryJoin)
	}
}

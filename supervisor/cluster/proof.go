package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// A node proves it belongs to the cluster without being sent the node
// secret: the asking node sends a fresh random challenge, and the answering
// node returns an HMAC, keyed with the node secret, over the challenge and
// the identity it claims (id, raft address, HTTP address). The asker
// computes the same HMAC and compares. The secret never travels to a node
// that has not proven it knows it, so `operator raft add-peer` and joins
// naming an address an attacker answers at hand the attacker nothing, and
// the attacker cannot answer as a server. A proof relayed from a real server
// names that server's own identity, so the asker can only ever add the real
// server.
//
// Before, a node verified a peer by calling its node-only route with the
// secret in a header: anyone who could make the leader call an address
// (add-peer with the user token) received the secret.

// ProofRoute is the open route that answers a challenge (GET, ?challenge=).
const ProofRoute = "/v1/internal/proof"

// proofDomain separates these HMACs from any other use of the secret.
const proofDomain = "paddock node proof v1"

// challengeBytes is the length of a challenge's randomness.
const challengeBytes = 32

// Proof is a node's answer to a challenge: who it is, its raft figures, and
// the HMAC that proves it knows the node secret.
type Proof struct {
	PeerInfo
	Proof string `json:"proof"`
}

// ErrBadProof means a peer did not prove it knows the node secret.
var ErrBadProof = errors.New("the server did not prove it knows this cluster's node secret")

// newChallenge returns a fresh random challenge.
func newChallenge() string {
	b := make([]byte, challengeBytes)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's randomness is gone: nothing is safe
	}
	return hex.EncodeToString(b)
}

// ValidChallenge reports whether c looks like a challenge newChallenge
// makes (hex, of its length): the proof route answers nothing else.
func ValidChallenge(c string) bool {
	b, err := hex.DecodeString(c)
	return err == nil && len(b) == challengeBytes
}

// proofMAC is the HMAC over challenge and identity keyed with secret.
func proofMAC(secret, challenge string, p PeerInfo) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	// Length-prefixed fields: no two identities encode alike.
	for _, f := range []string{proofDomain, challenge, p.ID, p.RaftAddr, p.HTTPAddr} {
		fmt.Fprintf(m, "%d:%s\n", len(f), f)
	}
	return m.Sum(nil)
}

// Prove answers a challenge as this node (the proof route's handler calls
// it; the challenge was checked with ValidChallenge).
func (n *Node) Prove(challenge string) Proof {
	return ProveAs(n.cfg.NodeSecret, challenge, n.LocalInfo())
}

// ProveAs answers a challenge as the server info describes, with secret.
func ProveAs(secret, challenge string, info PeerInfo) Proof {
	return Proof{PeerInfo: info, Proof: hex.EncodeToString(proofMAC(secret, challenge, info))}
}

// verifyProof checks p against the challenge sent.
func verifyProof(secret, challenge string, p Proof) error {
	got, err := hex.DecodeString(p.Proof)
	if err != nil || !hmac.Equal(got, proofMAC(secret, challenge, p.PeerInfo)) {
		return ErrBadProof
	}
	return nil
}

// peerInfo asks the server at addr who it is and checks that it proves it
// knows the node secret. Nothing secret is sent: it may be called with any
// address, including one an operator or a joining node named.
func (n *Node) peerInfo(ctx context.Context, addr string) (PeerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return askProof(ctx, n.http, n.scheme()+"://"+addr, n.cfg.NodeSecret)
}

// askProof is the asking side of the handshake against the server at base
// (scheme://host:port): a fresh challenge out, a verified Proof back.
func askProof(ctx context.Context, hc *http.Client, base, secret string) (PeerInfo, error) {
	challenge := newChallenge()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+ProofRoute+"?challenge="+url.QueryEscape(challenge), nil)
	if err != nil {
		return PeerInfo{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return PeerInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return PeerInfo{}, fmt.Errorf("peer %s: %s", base, resp.Status)
	}
	var p Proof
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&p); err != nil {
		return PeerInfo{}, fmt.Errorf("peer %s: %w", base, err)
	}
	if err := verifyProof(secret, challenge, p); err != nil {
		return PeerInfo{}, fmt.Errorf("peer %s: %w", base, err)
	}
	return p.PeerInfo, nil
}

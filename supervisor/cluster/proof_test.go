package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

const testSecret = "a-node-secret-for-the-tests"

// proofServer answers the proof route with answer(challenge).
func proofServer(t testing.TB, answer func(challenge string) (int, []byte)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(NodeSecretHeader) != "" {
			t.Errorf("the asking side sent a node secret header")
		}
		status, body := answer(r.URL.Query().Get("challenge"))
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTheProofHandshake(t *testing.T) {
	me := PeerInfo{ID: "n2", RaftAddr: "127.0.0.1:7701", HTTPAddr: "127.0.0.1:7700"}
	encode := func(p Proof) []byte { b, _ := json.Marshal(p); return b }
	for _, tc := range []struct {
		name   string
		answer func(challenge string) (int, []byte)
		ok     bool
	}{
		{"knows the secret", func(c string) (int, []byte) { return 200, encode(ProveAs(testSecret, c, me)) }, true},
		{"another secret", func(c string) (int, []byte) { return 200, encode(ProveAs("another-secret-entirely", c, me)) }, false},
		{"a replayed proof", func(string) (int, []byte) { return 200, encode(ProveAs(testSecret, newChallenge(), me)) }, false},
		{"a proof for another identity", func(c string) (int, []byte) {
			p := ProveAs(testSecret, c, me)
			p.ID = "n3"
			return 200, encode(p)
		}, false},
		{"no proof", func(string) (int, []byte) { return 200, encode(Proof{PeerInfo: me}) }, false},
		{"not hex", func(string) (int, []byte) { return 200, encode(Proof{PeerInfo: me, Proof: "zz"}) }, false},
		{"not JSON", func(string) (int, []byte) { return 200, []byte("<html>") }, false},
		{"an error status", func(c string) (int, []byte) { return 500, encode(ProveAs(testSecret, c, me)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := proofServer(t, tc.answer)
			got, err := askProof(context.Background(), srv.Client(), srv.URL, testSecret)
			if tc.ok != (err == nil) {
				t.Fatalf("askProof: %+v, %v; want ok=%v", got, err, tc.ok)
			}
			if tc.ok && got.ID != me.ID {
				t.Fatalf("askProof answered %+v, want %+v", got, me)
			}
			if !tc.ok && tc.name != "not JSON" && tc.name != "an error status" && !errors.Is(err, ErrBadProof) {
				t.Fatalf("askProof: %v, want ErrBadProof", err)
			}
		})
	}
}

// FuzzProofHandshake: whatever a server at a joining or added address
// answers, the asking side neither panics nor accepts an identity that was
// not proven with the node secret.
func FuzzProofHandshake(f *testing.F) {
	me := PeerInfo{ID: "n2", RaftAddr: "127.0.0.1:7701", HTTPAddr: "127.0.0.1:7700"}
	good, _ := json.Marshal(ProveAs(testSecret, "c", me))
	f.Add(200, good)
	f.Add(200, []byte(`{"id":"n2","raft_addr":"x","http_addr":"y","proof":"00"}`))
	f.Add(200, []byte(`{"proof":null,"stats":{"last_index":-1}}`))
	f.Add(404, []byte(`not found`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 200 || status > 599 {
			status = 200
		}
		srv := proofServer(t, func(string) (int, []byte) { return status, body })
		got, err := askProof(context.Background(), srv.Client(), srv.URL, testSecret)
		if err == nil {
			t.Fatalf("a fixed answer (made before the challenge) was accepted: %+v", got)
		}
	})
}

func TestValidChallenge(t *testing.T) {
	if !ValidChallenge(newChallenge()) {
		t.Fatal("a fresh challenge is not valid")
	}
	for _, c := range []string{"", "00", "zz" + newChallenge()[2:], newChallenge() + "00"} {
		if ValidChallenge(c) {
			t.Errorf("ValidChallenge(%q) = true", c)
		}
	}
}

// Command fakeagentctl implements just enough of the fixed agentctl launch
// interface (serve flags, info file, authenticated GET /v1/health) for runtime
// tests to run before or without the real agentctl.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: fakeagentctl serve -session ID -workspace DIR ...")
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	session := fs.String("session", "", "")
	workspace := fs.String("workspace", "", "")
	stateDir := fs.String("state-dir", "", "")
	listen := fs.String("listen", "127.0.0.1:0", "")
	advertise := fs.String("advertise", "", "")
	infoFile := fs.String("info-file", "", "")
	secretFile := fs.String("secret-file", "", "")
	fs.String("log-level", "info", "")
	fs.String("log-file", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	secret := os.Getenv("PADDOCK_AGENTCTL_SECRET")
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "secret file:", err)
			return 1
		}
		secret = strings.TrimSpace(string(b))
	}
	if secret == "" || *session == "" || *workspace == "" {
		fmt.Fprintln(os.Stderr, "fakeagentctl: secret, -session and -workspace are required")
		return 1
	}
	if *stateDir == "" {
		*stateDir = filepath.Join(*workspace, ".paddock")
	}
	if err := os.MkdirAll(*stateDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	host := *advertise
	if host == "" {
		host, _, _ = net.SplitHostPort(ln.Addr().String())
		if host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	nb := make([]byte, 16)
	_, _ = rand.Read(nb)
	info := map[string]any{"url": "http://" + net.JoinHostPort(host, port), "pid": os.Getpid(), "nonce": hex.EncodeToString(nb), "session_id": *session}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+secret {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"missing or wrong secret"}}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "session_id": *session, "nonce": info["nonce"], "pid": info["pid"], "fake": true})
	})
	b, _ := json.Marshal(info)
	if *infoFile != "" {
		tmp := *infoFile + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.Rename(tmp, *infoFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(string(b))
	srv := &http.Server{Handler: mux}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigs; _ = srv.Close() }()
	_ = srv.Serve(ln)
	return 0
}

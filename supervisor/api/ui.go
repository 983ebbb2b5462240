package api

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/paddockhq/paddock/ui"
)

// uiPolicy is the UI's Content-Security-Policy: scripts and styles come from
// this node's /ui/ only (no inline script), and the page talks to this node's
// API and WebSockets only. xterm.js sets styles from script and its DOM
// renderer adds <style> elements, hence 'unsafe-inline' for styles alone.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// uiFiles is the embedded bundle; uiIndex its index.html, served for every
// app route (/ui/, /ui/tasks/{id}, /ui/sessions/{id}) so deep links load.
var (
	uiFiles = ui.Files()
	uiIndex = mustRead(uiFiles, "index.html")
)

func mustRead(fsys fs.FS, name string) []byte {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic("ui bundle: " + err.Error()) // impossible: the bundle is embedded
	}
	return b
}

// uiRoot sends / to the UI.
func (s *Server) uiRoot(w http.ResponseWriter, r *http.Request) error {
	http.Redirect(w, r, "/ui/", http.StatusFound)
	return nil
}

// uiAsset serves the UI: a file of the bundle by its name, else index.html
// (the app routes itself on the path). Neither needs the token: the page
// asks for it when the API answers 401.
func (s *Server) uiAsset(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Security-Policy", uiPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// Bundle names carry no hash, so browsers revalidate every load.
	h.Set("Cache-Control", "no-cache")

	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/ui")
	name = strings.TrimPrefix(name, "/")
	if name != "" && name != "index.html" {
		if b, err := fs.ReadFile(uiFiles, name); err == nil {
			http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if path.Ext(name) != "" {
			return errorf(http.StatusNotFound, CodeNotFound, "no UI file %s", name)
		}
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(uiIndex))
	return nil
}

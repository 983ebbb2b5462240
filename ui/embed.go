// Package ui holds Paddock's web UI: its TypeScript source (src/, built by
// `make ui` with esbuild) and the built bundle (dist/), which this package
// embeds so that the paddock binary serves the UI without Node. The bundle
// is committed; CI rebuilds it and fails when it differs.
//
// It must not import anything of Paddock's: supervisor/api serves it.
package ui

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Files is the built UI: index.html, app.js and style.css at its root.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // impossible: "dist" is embedded above
	}
	return sub
}

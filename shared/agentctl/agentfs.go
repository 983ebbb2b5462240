package agentctl

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

// agentFS serves an ACP agent's fs/read_text_file and fs/write_text_file
// with the file API's confinement (workspace): the agent names absolute
// paths, which must lie in the workspace; a path that leaves it, through
// ".." or a symlink, is refused, as are writes to .git and agentctl's
// state. Writes are atomic and keep the file's mode.
type agentFS struct{ ws *workspace.Workspace }

// rel turns the agent's path into a workspace-relative one. A relative
// path is taken as relative to the workspace (the agent's cwd).
func (f agentFS) rel(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return p, nil
	}
	return relInside(f.ws.Dir(), p)
}

// relInside is p (absolute) relative to dir, or ErrEscape when p is not
// under dir. dir is compared as given and with its symlinks resolved (the
// agent may have learnt either spelling); the workspace then resolves
// what lies below it.
func relInside(dir, p string) (string, error) {
	p = filepath.Clean(p)
	for _, d := range []string{dir, evalOr(dir)} {
		r, err := filepath.Rel(d, p)
		if err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			return r, nil
		}
	}
	return "", fmt.Errorf("%q is outside the workspace %s: %w", p, dir, workspace.ErrEscape)
}

// evalOr is dir with its symlinks resolved (dir when that fails).
func evalOr(dir string) string {
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		return d
	}
	return dir
}

// ReadTextFile implements acpagent.FileSystem.
func (f agentFS) ReadTextFile(p string) (string, error) {
	r, err := f.rel(p)
	if err != nil {
		return "", err
	}
	b, err := f.ws.ReadFile(r)
	if errors.Is(err, workspace.ErrNotFound) {
		// The agent is told "resource not found" (acpagent), so it knows
		// to create the file rather than that it asked for a wrong path.
		return "", fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return string(b), nil
}

// WriteTextFile implements acpagent.FileSystem.
func (f agentFS) WriteTextFile(p, content string) error {
	r, err := f.rel(p)
	if err != nil {
		return err
	}
	if err := f.ws.WriteFile(r, []byte(content)); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

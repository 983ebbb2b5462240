// Package workspace gives confined access to one session's workspace directory:
// listing, reading and writing files, and read-only git status and diff.
//
// Every path is relative to the workspace root; absolute paths, ".." components
// that leave the root and symlinks that lead out of it are refused (the checks
// are done by os.Root, which resolves each component against an open directory
// descriptor). Only regular files are read or written (a FIFO or device is
// refused without blocking). A write goes to a new file beside the target that
// is then renamed over it, so it is atomic and never writes through a hard
// link; paths inside a .git directory are never written.
//
// git is always run with argv (never a shell) as `git -C ROOT ...`, with a
// configuration and environment under which it starts no program named by the
// workspace's own .git/config, which the agent can write (see gitSafety).
//
// This package must not import agentctl or anything under supervisor/; its
// listing entries are the wire type api.FileEntry.
package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/api"
)

// Sentinel errors returned by Workspace methods; match them with errors.Is.
var (
	// ErrEscape means the path leaves the workspace (absolute, "..", or a symlink out).
	ErrEscape = errors.New("path escapes the workspace")
	// ErrNotFound means the path does not exist.
	ErrNotFound = errors.New("no such file or directory")
	// ErrProtected means the path lies in a directory reserved for agentctl's state.
	ErrProtected = errors.New("path is reserved for agentctl state")
	// ErrTooLarge means a file exceeds MaxFileSize.
	ErrTooLarge = errors.New("file too large")
	// ErrNotGit means the workspace is not a git repository.
	ErrNotGit = errors.New("workspace is not a git repository")
	// ErrIsDir means a file operation was asked of a directory.
	ErrIsDir = errors.New("path is a directory")
	// ErrGitDir means a write was asked inside a .git directory (or of a .git
	// file): git metadata is never written through the API.
	ErrGitDir = errors.New("path is git metadata (.git), which the workspace API does not write")
	// ErrNotRegular means a file operation was asked of a FIFO, socket or device.
	ErrNotRegular = errors.New("not a regular file")
)

// MaxFileSize bounds reads and writes through the workspace API.
const MaxFileSize = 16 << 20

// GitStatusEntry is one line of `git status --porcelain=v1`.
type GitStatusEntry struct {
	Path   string `json:"path"`
	Status string `json:"status"` // the two-letter XY code
}

// GitStatus is the parsed result of git status.
type GitStatus struct {
	IsRepo  bool             `json:"is_repo"`
	Branch  string           `json:"branch"`
	Entries []GitStatusEntry `json:"entries"`
}

// Workspace is a confined view of one directory.
type Workspace struct {
	dir       string
	protected []string
	gitPath   string
}

// New returns a Workspace rooted at dir. protected lists top-level names
// (e.g. ".paddock") that may be read but never written through the API.
func New(dir string, protected ...string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %q: not a directory", dir)
	}
	return &Workspace{dir: abs, protected: protected, gitPath: "git"}, nil
}

// Dir returns the absolute workspace directory.
func (w *Workspace) Dir() string { return w.dir }

// Clean validates a workspace-relative path and returns its cleaned slash form
// ("." for the root). It refuses absolute paths and paths that climb out.
func Clean(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%q: %w", p, ErrEscape)
	}
	if p == "" {
		return ".", nil
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", fmt.Errorf("absolute path %q: %w", p, ErrEscape)
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q: %w", p, ErrEscape)
	}
	return c, nil
}

func (w *Workspace) open() (*os.Root, error) {
	r, err := os.OpenRoot(w.dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return r, nil
}

// mapErr turns os.Root errors into the package sentinels.
func mapErr(p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q: %w", p, ErrNotFound)
	case strings.Contains(err.Error(), "escapes") || strings.Contains(err.Error(), "outside"):
		return fmt.Errorf("%q: %w", p, ErrEscape)
	}
	return fmt.Errorf("%q: %w", p, err)
}

// List returns the entries of a directory, sorted by name.
func (w *Workspace) List(p string) ([]api.FileEntry, error) {
	c, err := Clean(p)
	if err != nil {
		return nil, err
	}
	r, err := w.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := openNoBlock(r, c)
	if err != nil {
		return nil, mapErr(p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, mapErr(p, err)
	}
	if !st.IsDir() {
		return []api.FileEntry{entryOf(c, st)}, nil
	}
	infos, err := f.Readdir(-1)
	if err != nil {
		return nil, mapErr(p, err)
	}
	out := make([]api.FileEntry, 0, len(infos))
	for _, fi := range infos {
		out = append(out, entryOf(path.Join(c, fi.Name()), fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func entryOf(p string, fi fs.FileInfo) api.FileEntry {
	t := "other"
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t = "symlink"
	case fi.IsDir():
		t = "dir"
	case fi.Mode().IsRegular():
		t = "file"
	}
	return api.FileEntry{Name: fi.Name(), Path: p, Type: t, Size: fi.Size(), Mode: fi.Mode().String(), ModTime: fi.ModTime().UTC()}
}

// openNoBlock opens name read-only without waiting: opening a FIFO for
// reading blocks until a writer comes (forever, holding a thread), and a
// device's open may act. The caller checks the type with Stat on the
// descriptor it got; O_NONBLOCK changes nothing for regular files and
// directories.
func openNoBlock(r *os.Root, name string) (*os.File, error) {
	return r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// ReadFile returns a file's contents (at most MaxFileSize bytes).
func (w *Workspace) ReadFile(p string) ([]byte, error) {
	c, err := Clean(p)
	if err != nil {
		return nil, err
	}
	r, err := w.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := openNoBlock(r, c)
	if err != nil {
		return nil, mapErr(p, err)
	}
	defer f.Close()
	st, err := f.Stat() // fstat of the opened descriptor: no race with a rename
	if err != nil {
		return nil, mapErr(p, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%q: %w", p, ErrIsDir)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%q (%s): %w", p, st.Mode().Type(), ErrNotRegular)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%q (%d bytes): %w", p, st.Size(), ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, mapErr(p, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%q: %w", p, ErrTooLarge)
	}
	return b, nil
}

// WriteFile writes a regular file, creating parent directories as needed.
// The data goes to a new file in the same directory that is then renamed
// over the target: readers see the old or the new content, never a part, and
// a hard link to a file outside the workspace is replaced, not written
// through. A symlink inside the workspace is kept and its target written.
// Paths inside .git (any component, in any case, after symlinks) are refused
// with ErrGitDir, names in the protected list with ErrProtected.
func (w *Workspace) WriteFile(p string, data []byte) error {
	c, err := Clean(p)
	if err != nil {
		return err
	}
	if c == "." {
		return fmt.Errorf("%q: %w", p, ErrIsDir)
	}
	if err := w.writable(p, c); err != nil {
		return err
	}
	if len(data) > MaxFileSize {
		return fmt.Errorf("%q: %w", p, ErrTooLarge)
	}
	r, err := w.open()
	if err != nil {
		return err
	}
	defer r.Close()
	target, err := resolve(r, p, c)
	if err != nil {
		return err
	}
	if err := w.writable(p, target); err != nil {
		return err
	}
	if d := path.Dir(target); d != "." {
		// 0755 like any tool's mkdir: the workspace root (or the session
		// directory above it) is 0700, so nobody else reaches these.
		if err := r.MkdirAll(d, 0o755); err != nil {
			return mapErr(p, err)
		}
	}
	perm, keep := fs.FileMode(0o644), false
	switch st, err := r.Lstat(target); {
	case err == nil && st.IsDir():
		return fmt.Errorf("%q: %w", p, ErrIsDir)
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("%q (%s): %w", p, st.Mode().Type(), ErrNotRegular)
	case err == nil:
		perm, keep = st.Mode().Perm(), true
	case !errors.Is(err, fs.ErrNotExist):
		return mapErr(p, err)
	}
	if err := replace(r, target, data, perm, keep); err != nil {
		return mapErr(p, err)
	}
	return nil
}

// writable refuses git metadata and protected names; c is a cleaned path.
func (w *Workspace) writable(p, c string) error {
	parts := strings.Split(c, "/")
	for _, part := range parts {
		if strings.EqualFold(part, ".git") {
			return fmt.Errorf("%q: %w", p, ErrGitDir)
		}
	}
	for _, prot := range w.protected {
		if parts[0] == prot {
			return fmt.Errorf("%q: %w", p, ErrProtected)
		}
	}
	return nil
}

// maxLinks bounds symlink resolution, as the kernel's limit of 40 does.
const maxLinks = 40

// resolve returns the cleaned path c with every symlink on it replaced by
// its target, so that WriteFile checks and replaces the file that would
// really be written. Components that do not exist yet are kept as they are.
// os.Root still confines every access; resolve only decides where a write
// lands (an absolute or climbing symlink is an escape, as os.Root says too).
func resolve(r *os.Root, p, c string) (string, error) {
	todo := strings.Split(c, "/")
	done := "."
	for links := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if done == "." {
				return "", fmt.Errorf("%q: %w", p, ErrEscape)
			}
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, name)
		st, err := r.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			rest := path.Join(append([]string{next}, todo...)...)
			if rest == ".." || strings.HasPrefix(rest, "../") {
				return "", fmt.Errorf("%q: %w", p, ErrEscape)
			}
			return rest, nil
		}
		if err != nil {
			return "", mapErr(p, err)
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%q: too many levels of symbolic links", p)
		}
		dest, err := r.Readlink(next)
		if err != nil {
			return "", mapErr(p, err)
		}
		if path.IsAbs(dest) {
			return "", fmt.Errorf("%q: symlink %s is absolute: %w", p, next, ErrEscape)
		}
		todo = append(strings.Split(dest, "/"), todo...)
	}
	return done, nil
}

// replace writes data to a new file beside name and renames it over name.
// keep: chmod the new file to perm (the old file's mode) instead of leaving
// perm to the umask.
func replace(r *os.Root, name string, data []byte, perm fs.FileMode, keep bool) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := path.Join(path.Dir(name), ".paddock-write-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && keep {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = ownLikeParent(r, name, f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}

// ownLikeParent gives f, written by a root agentctl, to the owner of the
// directory it is written into when that is another user (the agent runs as
// one under -agent-user): the agent can then change the file it is shown.
func ownLikeParent(r *os.Root, name string, f *os.File) error {
	if os.Geteuid() != 0 {
		return nil
	}
	st, err := r.Stat(path.Dir(name))
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Uid == 0 {
		return nil
	}
	return f.Chown(int(sys.Uid), int(sys.Gid))
}

// IsGitRepo reports whether the workspace is inside a git work tree.
// rev-parse reads no file content, so it needs no filter look-up.
func (w *Workspace) IsGitRepo(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := w.runGit(ctx, gitEnv(), "rev-parse", "--is-inside-work-tree")
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// Status runs git status; a workspace that is not a repository yields IsRepo=false.
func (w *Workspace) Status(ctx context.Context) (GitStatus, error) {
	if !w.IsGitRepo(ctx) {
		return GitStatus{IsRepo: false, Entries: []GitStatusEntry{}}, nil
	}
	out, err := w.git(ctx, "status", "--porcelain=v1", "-b", "-z", "--untracked-files=all", "--ignore-submodules=all")
	if err != nil {
		return GitStatus{}, err
	}
	st := GitStatus{IsRepo: true, Entries: []GitStatusEntry{}}
	recs := strings.Split(string(out), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 3 {
			continue
		}
		if strings.HasPrefix(rec, "## ") {
			b := strings.TrimPrefix(rec, "## ")
			if j := strings.Index(b, "..."); j >= 0 {
				b = b[:j]
			}
			b = strings.TrimPrefix(b, "No commits yet on ")
			st.Branch = strings.Fields(b + " ")[0]
			continue
		}
		e := GitStatusEntry{Status: rec[:2], Path: rec[3:]}
		if rec[0] == 'R' || rec[0] == 'C' {
			i++ // the original path follows a rename/copy record
		}
		st.Entries = append(st.Entries, e)
	}
	return st, nil
}

// Diff returns `git diff` of the work tree (staged=true: `git diff --cached`).
func (w *Workspace) Diff(ctx context.Context, staged bool) (string, error) {
	if !w.IsGitRepo(ctx) {
		return "", ErrNotGit
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all"}
	if staged {
		args = append(args, "--cached")
	}
	out, err := w.git(ctx, args...)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// gitSafety is the part of every API git command line that keeps git from
// starting a program named by configuration. git reads the workspace's own
// .git/config (which the agent, or anyone with a shell there, can write), so
// each setting that names a program is overridden on the command line, which
// wins over every config file. With them: status and diff pass
// --ignore-submodules=all (a submodule's git would read the submodule's own
// config) and diff passes --no-ext-diff --no-textconv (diff.<driver>.command
// and .textconv). Filter drivers have names of the config's choosing; git
// (below) empties every one it finds.
var gitSafety = []string{
	"-c", "core.fsmonitor=", // a hook program, or git's own fsmonitor daemon
	"-c", "core.hooksPath=/dev/null",
	"-c", "diff.external=",
	"-c", "core.pager=cat",
	"-c", "protocol.ext.allow=never",
	// The agent may run as another user (agentctl's -agent-user) and own the
	// workspace; git's ownership check guards against the configuration
	// such an owner writes, which the settings above already neutralise.
	"-c", "safe.directory=*",
}

// gitEnv is agentctl's environment without any GIT_* variable (a GIT_DIR or
// GIT_CONFIG_* inherited from the launcher would redirect or reconfigure the
// API's git), with system and global config off and no prompts or locks.
func gitEnv() []string {
	env := make([]string, 0, len(os.Environ())+6)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}

// git runs git in the workspace under gitSafety and gitEnv. Every filter
// driver the config defines (filter.NAME.clean/smudge/process, which git
// status runs on changed files) is first emptied through GIT_CONFIG_COUNT,
// which, unlike -c, takes any name, "=" included. A driver added to the
// config between that look-up and the command is not covered: whoever can
// write .git/config in that window already runs code as the workspace's user.
func (w *Workspace) git(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	env := gitEnv()
	out, err := w.runGit(ctx, env, "config", "-z", "--get-regexp", `^filter\.`)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 { // 1: no such key
			return nil, err
		}
	}
	env = append(env, filterOverrides(out)...)
	return w.runGit(ctx, env, args...)
}

// filterOverrides turns `git config -z --get-regexp ^filter\.` output
// (records "KEY\nVALUE\0") into GIT_CONFIG_COUNT variables that empty each
// driver's programs and make it optional.
func filterOverrides(out []byte) []string {
	seen := map[string]bool{}
	var env []string
	n := 0
	for _, rec := range strings.Split(string(out), "\x00") {
		key, _, _ := strings.Cut(rec, "\n")
		rest, ok := strings.CutPrefix(key, "filter.") // filter.NAME.VAR
		i := strings.LastIndexByte(rest, '.')
		if !ok || i <= 0 {
			continue
		}
		name := rest[:i]
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, v := range [][2]string{{"clean", ""}, {"smudge", ""}, {"process", ""}, {"required", "false"}} {
			env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=filter.%s.%s", n, name, v[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, v[1]))
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", n))
}

// runGit runs git with gitSafety in the workspace and env as its whole environment.
func (w *Workspace) runGit(ctx context.Context, env []string, args ...string) ([]byte, error) {
	argv := append(append([]string{"-C", w.dir}, gitSafety...), args...)
	cmd := exec.CommandContext(ctx, w.gitPath, argv...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Package runtime is the SDK for Paddock executor runtime plugins.
//
// A runtime plugin is a separate binary that the supervisor starts with
// hashicorp/go-plugin and talks to over gRPC. It decides where a session's
// agentctl runs (a local process, a container, another machine) and hands back
// an opaque handle the supervisor stores and later uses to recover, inspect,
// stop and destroy that executor.
//
// Plugin authors implement [Runtime] and call [Serve] from main. The host (the
// supervisor, or a test) loads a plugin with [NewClient] and gets a [Runtime]
// whose errors are the same sentinel errors the plugin returned ([ErrNotFound],
// [ErrInvalidConfig], [ErrUnavailable], [ErrInvalidRequest], [ErrUnsupported]).
//
// Optional capabilities are separate interfaces, so [Runtime] never grows and
// a plugin that lacks one needs no change. [Reconciler] is the first: a
// plugin whose implementation also has Reconcile(ctx, [ReconcileRequest])
// removes the executors of its cluster that no executor record owns (the
// supervisor's leader calls it after recovery and periodically). On the host
// side the Runtime always has the method (type-assert for Reconciler); a
// plugin without it, or one built with an older SDK, answers
// [ErrUnsupported]. [WorkspaceChecker] is the second: CheckTaskWorkspace
// tells the supervisor, when a task is created, whether the plugin's
// launches would accept the task's workspace path.
//
// The sub-packages are the plugin author's kit, which the bundled runtimes
// and examples/runtime-subprocess are written with (docs/PLUGINS.md walks
// through one):
//   - configspec declares a plugin's `config { … }` body once: the same
//     declaration decodes it with diagnostics at file:line,col and is the
//     Schema ConfigSchema returns;
//   - pluginbase, embedded in a plugin, answers Info, ConfigSchema and
//     SetConfig from a spec and holds the per-session lock;
//   - workspace prepares a session's directories and git worktree and
//     confines task paths by one rule (relative to the root, symlinks
//     resolved, absolute paths confined);
//   - agentctlproc starts, checks and stops a local agentctl;
//   - conformance checks a plugin binary end to end, runtimetest builds
//     binaries and fixtures for tests.
//
// This package and its sub-packages must never import supervisor/ (or
// anything outside shared/ in this module): a third-party plugin builds with
// shared/ alone. TestSharedImportsOnlyShared checks it.
package runtime

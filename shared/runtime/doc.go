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
// [ErrUnsupported].
//
// The conformance kit in the conformance sub-package checks a plugin binary end
// to end. This package must never import supervisor/ (or anything outside
// shared/ in this module): a third-party plugin builds with shared/ alone.
package runtime

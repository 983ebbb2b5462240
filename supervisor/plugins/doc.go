// Package plugins loads and supervises the supervisor's runtime plugin
// processes (paddock-runtime-<name> executables in plugin_dir).
//
// A Manager discovers the executables, loads each one that has a
// `plugin "<name>"` block (go-plugin handshake, plugin API version
// negotiation, SetConfig with the block's source so that the plugin's own
// diagnostics carry true file ranges), and then supervises it:
//
//   - A plugin that cannot be loaded (not a plugin, bad handshake,
//     incompatible API version, exits at start, hangs past Options.LoadTimeout)
//     is refused with a log line and listed as unhealthy with its error; the
//     server keeps running. Invalid plugin configuration is returned from
//     Start as a *config.DiagError (file:line:col), so the server exits
//     before serving.
//   - A loaded plugin whose process exits or stops answering is restarted
//     with exponential backoff (Options.RestartBackoffMin doubling up to
//     Options.RestartBackoffMax, for as long as the Manager runs). Executors
//     the plugin launched are detached processes and are not touched.
//   - Each loaded plugin's go-plugin reattach configuration is kept in
//     DATA_DIR/plugins/<name>.reattach.json. A new Manager (a restarted
//     supervisor) first reattaches to a still-running plugin process —
//     after checking through /proc that the pid runs that plugin's binary and
//     that the handshake and Info succeed — instead of starting a duplicate.
//     Stale files are removed.
//   - Plugin logs reach the supervisor's logger (named after the plugin's
//     binary) and DATA_DIR/plugins/<name>.log. The SDK's PluginLogger appends
//     to that file itself once its stderr breaks, so a plugin outlives its
//     supervisor without dying of a broken pipe and keeps logging.
//
// Close is a graceful stop: it kills the plugin processes (executors keep
// running) and removes their reattach files. Reattach is for a supervisor
// that died without Close (crash, kill -9, OOM) or that handed over with
// Detach.
//
// This package may import supervisor/config and shared/runtime; it must not
// import the API, cluster or state packages (they depend on it, not the other
// way round).
package plugins

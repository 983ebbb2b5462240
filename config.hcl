# Paddock: a single-node configuration for `make run`.
# Every key and its default is described in docs/CONFIGURATION.md.
# Several files can be given (`paddock server -config a.hcl -config b.hcl`); later
# files override earlier ones.

# This node's name (its raft server ID) and where it keeps its raft log, snapshots,
# identity and plugin state.
node_name = "n1"
data_dir  = "./data"
bind_addr = "127.0.0.1"
log_level = "info" # trace | debug | info | warn | error

# HTTP API (and WebSockets, leader forwarding) and the raft transport.
ports {
  http = 7700
  raft = 7701
}

# One node that bootstraps itself; a cluster sets 3 or 5 and lists its peers'
# HTTP addresses in retry_join.
server {
  bootstrap_expect = 1
}

# No acl block: the API is open (the server warns loudly at start).
# acl {
#   token = "s3cr3t"
# }

# Serve Go's profiler under /debug/pprof/ (behind the token). Off by default.
# enable_debug = true

# Where the paddock-runtime-* plugin binaries are (`make build` puts them there).
plugin_dir = "./bin/plugins"

# The standalone runtime runs each session's agentctl as a local process, with
# its workspace under workspace_root. A task's own workspace (task create
# -workspace) must lie inside task_workspace_root (default: workspace_root):
# point it at the directory of your checkouts. The plugin validates its own
# config block.
plugin "standalone" {
  config {
    workspace_root = "./data/workspaces"
    # task_workspace_root = "/home/you/src"
  }
}

# The offline demo agent, speaking ACP on stdio. Its permission requests wait
# for a person (paddock session approve|deny, the web page, or chat); reads and
# searches are allowed without asking.
agent "demo" {
  protocol   = "acp"
  command    = ["paddock-demo-agent"]
  permission = "ask"
  auto_allow = ["read", "search", "think"]
}

# The demo agent as a terminal program (pty protocol): a new conversation gets
# --session-id TOKEN and a resumed one --resume TOKEN.
agent "demo-tty" {
  protocol                = "pty"
  command                 = ["paddock-demo-agent", "--tty"]
  new_args                = ["--session-id", "{{resume_token}}"]
  resume_args             = ["--resume", "{{resume_token}}"]
  supports_session_resume = true
}

# The demo agent without session resume (advertises no loadSession), to see
# what a non-resumable session looks like.
agent "demo-noresume" {
  protocol = "acp"
  command  = ["paddock-demo-agent", "--no-resume"]
}

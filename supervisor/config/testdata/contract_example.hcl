node_name = "n1"                 # default: hostname
data_dir  = "./data"             # raft log, snapshots, node identity, plugin state
bind_addr = "127.0.0.1"
log_level = "info"               # trace|debug|info|warn|error
log_json  = false

ports {
  http = 7700                    # HTTP API, WebSockets, leader forwarding
  raft = 7701
}

server {
  bootstrap_expect     = 1                   # 1, 3 or 5
  retry_join           = ["127.0.0.2:7700"]  # peers' http addresses; [] alone
  heartbeat_timeout    = "300ms"             # raft timing; LAN-tuned defaults
  election_timeout     = "300ms"
  leader_lease_timeout = "150ms"
}

acl {
  token = "s3cr3t"               # absent: open API, loud warning at start
}

api {
  allowed_origins = ["http://localhost:7700"]   # browser Origins allowed on WebSockets
  max_body        = "1MiB"
}

plugin_dir = "./bin/plugins"

plugin "docker" {                # each config block is validated by its plugin
  config {
    image = "paddock-executor:dev"
  }
}

plugin "standalone" {
  config {
    workspace_root = "./data/workspaces"
  }
}

plugin "remote" {
  config {
    host "gpu-box" {
      url         = "http://10.0.0.5:7800"
      secret_file = "/etc/paddock/gpu-box.secret"
    }
  }
}

agent "demo" {
  protocol   = "acp"             # acp | pty
  command    = ["paddock-demo-agent"]
  permission = "ask"             # ask (a person answers) | allow | deny
  auto_allow = ["read", "search", "think"]   # tool kinds allowed without asking
  # permission_timeout = "10m"   # then the reject option is chosen
}

agent "claude-cli" {
  protocol                = "pty"
  command                 = ["claude"]
  new_args                = ["--session-id", "{{resume_token}}"]
  resume_args             = ["--resume", "{{resume_token}}"]
  supports_session_resume = true
}

recovery {
  auto_resume    = "active"      # all | active | none
  health_timeout = "2s"
}

terminal {
  shell        = ["/bin/sh", "-l"]   # default: $SHELL of agentctl, else /bin/sh
  replay_bytes = "256KiB"
  idle_timeout = "30m"
}

lease {
  ttl = "10s"
}

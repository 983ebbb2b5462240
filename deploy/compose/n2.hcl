# Paddock in Docker Compose: node n2 of three (docker-compose.yml). The three
# files differ only in node_name, bind_addr and retry_join.
node_name = "n2"
# Each node has a loopback address of its own (the containers share the
# host's network, so executors' published ports are reachable from all).
bind_addr = "127.0.0.12"
data_dir  = "/var/lib/paddock"
# The image keeps the runtime plugins here.
plugin_dir = "/usr/local/lib/paddock/plugins"
log_level  = "info"

ports {
  http = 7700
  raft = 7701
}

server {
  bootstrap_expect = 3
  retry_join       = ["127.0.0.11:7700", "127.0.0.13:7700"]
  # The same on all three; replace it (and the token) for anything but a demo.
  cluster_secret = "paddock-compose-cluster-secret"
}

acl {
  token = "paddock-compose-token"
}

# Executors are containers of paddock-executor:dev (make image) on the host's
# engine, whose socket the compose file mounts. Their workspaces live in a host
# directory that the compose file mounts at the same path into every node: the
# engine resolves bind mounts on the host.
plugin "docker" {
  config {
    image          = "paddock-executor:dev"
    workspace_root = "/var/lib/paddock-compose/workspaces"
    publish_addr   = "127.0.0.1"
    cluster        = "paddock-compose"
  }
}

agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}

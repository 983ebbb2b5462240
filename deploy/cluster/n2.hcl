# Paddock: node n2 of a three-machine cluster (machines 10.0.0.11, .12, .13).
# docs/OPERATIONS.md walks through running it. The three files differ only in the
# lines marked PER NODE; every other line must be the same on all three.

# PER NODE: this machine's name (its raft server ID) and the IP address it
# listens on and advertises to the others. A concrete address, never 0.0.0.0.
node_name = "n2"
bind_addr = "10.0.0.12"

# Local to each machine (the same path everywhere keeps operations simple):
# raft log, snapshots, node identity and plugin state. Back it up with
# `paddock operator snapshot save`, not by copying it.
data_dir   = "/var/lib/paddock"
# A relative plugin_dir would be resolved against this file's directory.
plugin_dir = "/usr/local/lib/paddock/plugins"
log_level  = "info"

# The same ports on every machine; open both between the three machines only.
ports {
  http = 7700
  raft = 7701
}

server {
  # The same on all three: the cluster bootstraps once three servers without
  # state see each other.
  bootstrap_expect = 3
  # PER NODE: the other two servers' HTTP addresses.
  retry_join = ["10.0.0.11:7700", "10.0.0.13:7700"]
  # The same on all three: authenticates joins, forwarded writes and runtime
  # calls between servers. At least 16 characters; generate one with
  #   head -c 32 /dev/urandom | base64
  # Replace this placeholder before the first start.
  cluster_secret = "REPLACE-with-the-same-long-random-string"
}

# The same on all three: users and the CLI send it (PADDOCK_TOKEN).
acl {
  token = "REPLACE-with-the-api-token"
}

# The same runtimes and agents on every machine: the leader may place a session
# on any node, and a node runs the executors it launched (only its own plugin
# recovers, stops or destroys them; the others reach them through it).
plugin "standalone" {
  config {
    # On this machine's own disk. A session's workspace stays on the node that
    # launched it: when that machine is down its sessions wait for it
    # (node_unavailable) and come back with it.
    workspace_root = "/var/lib/paddock/workspaces"
    # Only when workspace_root is storage every machine mounts at this same
    # path (NFS and the like), and then on all three: a survivor may take over
    # the sessions of a lost machine.
    # shared_workspace_root = true
  }
}

# Docker executors on this machine's own engine (optional; every machine then
# needs the image: `docker save paddock-executor:dev | docker load` on each).
# plugin "docker" {
#   config {
#     image          = "paddock-executor:dev"
#     host           = "unix:///var/run/docker.sock" # this machine's engine
#     workspace_root = "/var/lib/paddock/docker-workspaces"
#     # agentctl's port is published on this machine's bind_addr
#     # (10.0.0.12), which every server reaches; publish_addr overrides it.
#   }
# }

agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}

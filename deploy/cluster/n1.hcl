# Paddock: node n1 of a three-machine cluster (machines 10.0.0.11, .12, .13).
# docs/OPERATIONS.md walks through running it. The three files differ only in the
# lines marked PER NODE; every other line must be the same on all three.

# PER NODE: this machine's name (its raft server ID) and the IP address it
# listens on and advertises to the others. A concrete address, never 0.0.0.0.
node_name = "n1"
bind_addr = "10.0.0.11"

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
  retry_join = ["10.0.0.12:7700", "10.0.0.13:7700"]
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
# on any node, and a node runs the executors it launched.
plugin "standalone" {
  config {
    workspace_root = "/var/lib/paddock/workspaces"
  }
}

agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}

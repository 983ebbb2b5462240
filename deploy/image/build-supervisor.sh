#!/usr/bin/env bash
# Builds the supervisor image (default paddock:dev) FROM scratch: static
# paddock, agentctl and paddock-demo-agent in /usr/local/bin and the runtime
# plugins in /usr/local/lib/paddock/plugins (the image's plugin_dir).
#
#   deploy/image/build-supervisor.sh [-t TAG] [-b BIN_DIR]
#
#   -t TAG      image tag (default paddock:dev, or $PADDOCK_SUPERVISOR_IMAGE)
#   -b BIN_DIR  directory holding `make build`'s output (default bin/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tag=${PADDOCK_SUPERVISOR_IMAGE:-paddock:dev}
bin="$root/bin"
while getopts "t:b:" opt; do
	case $opt in
	t) tag=$OPTARG ;;
	b) bin=$OPTARG ;;
	*) sed -n '2,9p' "$0" >&2; exit 2 ;;
	esac
done

die() { echo "image: $*" >&2; exit 1; }
for f in "$bin/paddock" "$bin/agentctl" "$bin/paddock-demo-agent"; do
	[ -x "$f" ] || die "$f is missing (run make build)"
done
ls "$bin"/plugins/paddock-runtime-* >/dev/null 2>&1 || die "$bin/plugins has no runtime plugins (run make build)"
static() { ! command -v file >/dev/null || ! file -L "$1" | grep -q "dynamically linked"; }
for f in "$bin/paddock" "$bin/agentctl" "$bin/paddock-demo-agent" "$bin"/plugins/paddock-runtime-*; do
	static "$f" || die "$f is dynamically linked; a scratch image needs static binaries"
done

ctx=$(mktemp -d "${TMPDIR:-/tmp}/paddock-supervisor-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
rootfs="$ctx/rootfs"
mkdir -p "$rootfs"/{usr/local/bin,usr/local/lib/paddock/plugins,etc/paddock,tmp,var/lib/paddock}
chmod 1777 "$rootfs/tmp"
install -m 0755 "$bin/paddock" "$bin/agentctl" "$bin/paddock-demo-agent" "$rootfs/usr/local/bin/"
install -m 0755 "$bin"/plugins/paddock-runtime-* "$rootfs/usr/local/lib/paddock/plugins/"
printf 'root:x:0:0:root:/var/lib/paddock:/bin/false\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\n' >"$rootfs/etc/group"
cp "$here/supervisor.Dockerfile" "$ctx/Dockerfile"

echo "image: building $tag from $ctx"
DOCKER_BUILDKIT=0 docker build --pull=false -q -t "$tag" "$ctx" >/dev/null
docker image inspect -f "image: built $tag ({{.Id}}, {{.Size}} bytes)" "$tag"

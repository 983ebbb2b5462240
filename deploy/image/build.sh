#!/usr/bin/env bash
# Builds the local executor image (default paddock-executor:dev) FROM scratch:
# static agentctl and paddock-demo-agent in /usr/local/bin, Debian's
# busybox-static as /bin/busybox with a symlink per applet (sh, ls, cat, …).
#
#   deploy/image/build.sh [-t TAG] [-b BIN_DIR] [-B BUSYBOX] [-k]
#
#   -t TAG      image tag (default paddock-executor:dev, or $PADDOCK_IMAGE)
#   -b BIN_DIR  directory holding agentctl and paddock-demo-agent (default bin/)
#   -B BUSYBOX  static busybox binary (default /bin/busybox)
#   -k          keep the prepared context directory (printed) for inspection
#
# The binaries must be static (`make build` uses CGO_ENABLED=0). No registry is
# contacted: the base is scratch and the legacy builder is used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tag=${PADDOCK_IMAGE:-paddock-executor:dev}
bin="$root/bin"
busybox=/bin/busybox
keep=0
while getopts "t:b:B:k" opt; do
	case $opt in
	t) tag=$OPTARG ;;
	b) bin=$OPTARG ;;
	B) busybox=$OPTARG ;;
	k) keep=1 ;;
	*) sed -n '2,14p' "$0" >&2; exit 2 ;;
	esac
done

die() { echo "image: $*" >&2; exit 1; }
for f in "$bin/agentctl" "$bin/paddock-demo-agent"; do
	[ -x "$f" ] || die "$f is missing (run make build)"
done
[ -x "$busybox" ] || die "$busybox is missing (apt-get install busybox-static)"
static() { ! command -v file >/dev/null || ! file -L "$1" | grep -q "dynamically linked"; }
for f in "$bin/agentctl" "$bin/paddock-demo-agent" "$busybox"; do
	static "$f" || die "$f is dynamically linked; a scratch image needs static binaries"
done

ctx=$(mktemp -d "${TMPDIR:-/tmp}/paddock-image.XXXXXX")
if [ "$keep" = 0 ]; then trap 'rm -rf "$ctx"' EXIT; fi
rootfs="$ctx/rootfs"
mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,tmp,root,workspace,var/lib/paddock}
chmod 1777 "$rootfs/tmp"
install -m 0755 "$bin/agentctl" "$bin/paddock-demo-agent" "$rootfs/usr/local/bin/"
install -m 0755 "$busybox" "$rootfs/bin/busybox"
# One symlink per applet, in the directory busybox itself would install it to.
"$busybox" --list-full | while read -r applet; do
	case $applet in "" | bin/busybox) continue ;; esac
	[ -e "$rootfs/$applet" ] || ln -s /bin/busybox "$rootfs/$applet"
done
[ -L "$rootfs/bin/sh" ] || ln -s /bin/busybox "$rootfs/bin/sh"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
cp "$here/Dockerfile" "$ctx/Dockerfile"

echo "image: building $tag from $ctx"
# Legacy builder: works with Debian's engine without buildx and never pulls.
DOCKER_BUILDKIT=0 docker build --pull=false -q -t "$tag" "$ctx" >/dev/null
docker image inspect -f "image: built $tag ({{.Id}}, {{.Size}} bytes)" "$tag"

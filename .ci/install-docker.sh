#!/usr/bin/env bash
# Makes a Docker engine answer on this machine, for the docker runtime tests.
#
#   .ci/install-docker.sh            # install if needed, start dockerd, wait
#
# Idempotent: exits 0 at once when `docker info` already answers. Otherwise it
# installs Debian's docker.io and busybox-static when dockerd is absent
# (needs root and the Debian archive), starts dockerd in the background with
# its log in $DOCKERD_LOG (default /var/log/dockerd.log), and waits up to
# $DOCKERD_WAIT seconds (default 60) for `docker info`. Nothing is ever pulled:
# the test image is built locally by `make image`.
# Exit status: 0 when the engine answers, 1 otherwise (with the log's tail).
set -euo pipefail

log=${DOCKERD_LOG:-/var/log/dockerd.log}
wait_s=${DOCKERD_WAIT:-60}

engine_up() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_up; then
	echo "install-docker: engine already answers"
	exit 0
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-docker: docker.io/busybox-static missing and not root; cannot install" >&2
		exit 1
	fi
	echo "install-docker: installing docker.io and busybox-static"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q docker.io busybox-static >/dev/null
fi

if engine_up; then
	echo "install-docker: engine answers"
	exit 0
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
	echo "install-docker: starting dockerd (log: $log)"
	mkdir -p "$(dirname "$log")"
	# setsid: dockerd must outlive this script and the CI step's process group.
	setsid dockerd >>"$log" 2>&1 </dev/null &
fi

start=$SECONDS
while ((SECONDS - start < wait_s)); do
	if engine_up; then
		echo "install-docker: engine answers after ~$((SECONDS - start))s"
		exit 0
	fi
	sleep 0.25
done
echo "install-docker: docker info did not answer within ${wait_s}s; dockerd log tail:" >&2
tail -n 30 "$log" >&2 || true
exit 1

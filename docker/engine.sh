#!/usr/bin/env bash
# Make a Docker engine reachable for `make docker-*`: use $DOCKER_HOST or the default socket when an
# engine answers there; otherwise start a private dockerd (as root) with the settings a machine
# without a registry, iptables or a bridge needs, and print the DOCKER_HOST to use.
#   docker/engine.sh start   prints `DOCKER_HOST=unix://...` (starting dockerd if none answers)
#   docker/engine.sh stop    stops the dockerd this script started (by the pid it recorded)
# The private engine keeps its state under $CAPSULE_DOCKER_ROOT (default /var/lib/capsule-docker).
set -euo pipefail

root=${CAPSULE_DOCKER_ROOT:-/var/lib/capsule-docker}
sock="unix://$root/docker.sock"
pidfile="$root/dockerd.pid"

die() { echo "Error: $*" >&2; exit 2; }

answers() { DOCKER_HOST="$1" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start() {
  command -v docker >/dev/null || die "no docker client; install it (Debian: apt-get install docker.io)"
  if [ -n "${DOCKER_HOST:-}" ] && answers "$DOCKER_HOST"; then echo "DOCKER_HOST=$DOCKER_HOST"; return; fi
  if answers "unix:///var/run/docker.sock"; then echo "DOCKER_HOST=unix:///var/run/docker.sock"; return; fi
  if answers "$sock"; then echo "DOCKER_HOST=$sock"; return; fi
  command -v dockerd >/dev/null || die "no Docker engine answers and dockerd is not installed (apt-get install docker.io)"
  [ "$(id -u)" = 0 ] || die "no Docker engine answers; start one, or run this as root to start a private dockerd"
  mkdir -p "$root/data" "$root/exec"
  # vfs: no overlay filesystem needed; no iptables/bridge: builds and runs use --network=host
  nohup dockerd --data-root "$root/data" --exec-root "$root/exec" -H "$sock" --pidfile "$pidfile" \
    --storage-driver=vfs --iptables=false --ip6tables=false --bridge=none >"$root/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do
    if answers "$sock"; then echo "DOCKER_HOST=$sock"; return; fi
    sleep 1
  done
  die "dockerd did not answer on $sock within 60 s; see $root/dockerd.log"
}

stop() {
  [ -f "$pidfile" ] || { echo "no private dockerd recorded in $pidfile"; return; }
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || { echo "stopped dockerd $pid"; return; }; sleep 1; done
  die "dockerd $pid did not stop within 30 s"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: docker/engine.sh start|stop" ;;
esac

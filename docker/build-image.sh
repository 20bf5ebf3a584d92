#!/usr/bin/env bash
# Build one of the capsule's images offline (`make docker-build-cpu`, `make docker-build`):
#   docker/build-image.sh DOCKERFILE LOCK[,BUILD_LOCK...] TAG [docker build args...]
# 1. docker/stage-wheels.sh puts every file of each lock into docker/wheels/<first lock's name> (each
#    checked against the lock's sha256 by pip) and the capsule's pinned artifacts into docker/stage/cache;
#    the first lock's sha256 is the image's identity (CAPSULE_IMAGE_LOCK_SHA256);
# 2. a throwaway HTTP server on 127.0.0.1 serves those wheels to the build (--network=host), so pip in
#    the build needs no package index and no CA bundle, and no wheel is copied into a layer;
# 3. `docker build` with the classic builder (no BuildKit needed), then the server is stopped.
set -euo pipefail
dockerfile=$1; locks=$2; tag=$3; shift 3
lock=${locks%%,*}
die() { echo "Error: $*" >&2; exit 2; }
command -v docker >/dev/null || die "no docker client (apt-get install docker.io)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine answers at ${DOCKER_HOST:-the default socket}; run \`bash docker/engine.sh start\`"

wheels="docker/wheels/$(basename "$lock" .lock)"
IFS=, read -r -a all_locks <<<"$locks"
for each in "${all_locks[@]}"; do bash docker/stage-wheels.sh "$each" "$wheels" docker/stage/cache; done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$wheels" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 20); do curl -fs "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.5; done
start=$(date +%s)
DOCKER_BUILDKIT=0 docker build --network=host -f "$dockerfile" -t "$tag" \
  --build-arg CAPSULE_WHEELS_URL="http://127.0.0.1:$port/" \
  --build-arg CAPSULE_IMAGE_TAG="$tag" \
  --build-arg CAPSULE_IMAGE_LOCK_SHA256="$(sha256sum "$lock" | cut -d' ' -f1)" \
  --build-arg CAPSULE_IMAGE_BUILD_TIME="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$@" .
echo "built $tag in $(( $(date +%s) - start )) s: $(docker image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.2f GB", $1/1e9}')"

#!/usr/bin/env bash
# Between the two halves of `make docker-test`: under the vfs storage driver every layer and every
# container is a whole copy of its image, so the GPU image's build needs far more disk than its size.
# When the engine's data directory has less than $CAPSULE_DOCKER_NEED_GB free (default 55), remove the
# CPU image (its checks have already run) and stopped containers, saying what was removed and why.
#   docker/make-room.sh IMAGE
set -euo pipefail
image=$1
need=${CAPSULE_DOCKER_NEED_GB:-55}
driver=$(docker info --format '{{.Driver}}')
root=$(docker info --format '{{.DockerRootDir}}')
free=$(df -Pk "$root" 2>/dev/null | awk 'NR==2 {printf "%d", $4 / 1048576}')
if [ "$driver" != vfs ] || [ -z "$free" ] || [ "$free" -ge "$need" ]; then
  echo "disk: ${free:-?} GB free under $root ($driver driver); keeping $image"
  exit 0
fi
echo "disk: $free GB free under $root, below the $need GB the GPU image's build takes under vfs;" \
  "removing $image (its checks have run) and stopped containers"
docker container prune -f >/dev/null
docker image rm "$image" >/dev/null 2>&1 || true
docker image prune -f >/dev/null
echo "disk: $(df -Pk "$root" | awk 'NR==2 {printf "%d", $4 / 1048576}') GB free now"

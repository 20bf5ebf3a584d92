#!/usr/bin/env bash
# Pin docker/Dockerfile's FROM line to the digest its tag resolves to now (run where Docker is):
#   FROM nvidia/cuda:13.0.2-devel-ubuntu24.04  ->  FROM nvidia/cuda:13.0.2-devel-ubuntu24.04@sha256:...
# The digest is the multi-platform index digest from `docker buildx imagetools inspect`, or, failing
# that, the repo digest `docker pull` records. Re-running replaces an older digest. Commit the result.
set -euo pipefail
dockerfile="${1:-$(dirname "$0")/Dockerfile}"
from_line="$(grep -m1 -E '^FROM ' "$dockerfile")"
image="${from_line#FROM }"
image="${image%% *}"
tag="${image%@*}"  # drop a digest pinned earlier
digest=""
if docker buildx version >/dev/null 2>&1; then
  digest="$(docker buildx imagetools inspect "$tag" --format '{{json .Manifest}}' \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])')"
fi
if [[ -z "$digest" ]]; then
  docker pull --quiet "$tag" >/dev/null
  repo_digest="$(docker image inspect --format '{{index .RepoDigests 0}}' "$tag")"
  digest="${repo_digest#*@}"
fi
if [[ ! "$digest" =~ ^sha256:[0-9a-f]{64}$ ]]; then
  echo "pin-base: could not resolve $tag to a digest (got '$digest')" >&2
  exit 1
fi
sed -i -E "0,/^FROM .*/s|^FROM [^ ]+|FROM ${tag}@${digest}|" "$dockerfile"
echo "pinned: FROM ${tag}@${digest}"

#!/usr/bin/env bash
# Stage every file the CPU image installs into its build context (not committed), so the image builds
# offline: no package index, no CA bundle and no network inside `docker build`.
#   docker/stage-wheels.sh LOCK WHEELS_DIR CACHE_DIR
# WHEELS_DIR gets every wheel of LOCK (pip download --require-hashes: each file checked against the
# lock; the torch CPU build from this machine's find-links, else from pytorch.org's CPU index).
# CACHE_DIR gets the capsule's pinned artifacts (IFEval prompts, punkt_tab, the embedded model), fetched
# and sha256-checked by `capsule fetch all` itself; the build checks them again.
set -euo pipefail
lock=$1; wheels=$2; cache=$3
capsule=${CAPSULE_BIN:-.venv/bin/capsule}
mkdir -p "$wheels" "$cache"
python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
  --extra-index-url https://download.pytorch.org/whl/cpu -d "$wheels" -r "$lock" 2>&1 \
  | grep -v "is ignored: it is neither a file nor a directory" || true
count=$(find "$wheels" -name '*.whl' | wc -l)
expected=$(grep -c -- '--hash=' "$lock")
[ "$count" -ge "$expected" ] || { echo "Error: staged $count wheels of $expected in $lock into $wheels; see pip's message above" >&2; exit 2; }
CAPSULE_CACHE="$cache" "$capsule" fetch all >/dev/null
CAPSULE_CACHE="$cache" "$(dirname "$capsule")/python" -c \
  'from capsule.artifacts.cache import scorer_data_dir; from ifeval_scorer.nltk_data import materialize; materialize(scorer_data_dir())'
echo "staged $count wheels ($(du -sh "$wheels" | cut -f1)) and the pinned artifacts ($(du -sh "$cache" | cut -f1))"

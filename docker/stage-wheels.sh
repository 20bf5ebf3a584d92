#!/usr/bin/env bash
# Stage every file the CPU image installs into its build context (not committed), so the image builds
# offline: no package index, no CA bundle and no network inside `docker build`.
#   docker/stage-wheels.sh LOCK WHEELS_DIR CACHE_DIR
# WHEELS_DIR gets every file of LOCK (pip download --require-hashes: each checked against the lock;
# langdetect is an sdist). The torch CPU build (`+cpu`) is not on PyPI: pip finds it through its
# find-links (this machine: /opt/wheels); elsewhere from CAPSULE_TORCH_INDEX (default https://download.pytorch.org/whl/cpu).
# CACHE_DIR gets the capsule's pinned artifacts (IFEval prompts, punkt_tab, the embedded model), fetched
# and sha256-checked by `capsule fetch all` itself; the build checks them again.
set -euo pipefail
# shellcheck source=scripts/torch_source.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/torch_source.sh"  # a local +cpu wheel, else the PyTorch CPU index
lock=$1; wheels=$2; cache=$3
capsule=${CAPSULE_BIN:-.venv/bin/capsule}
mkdir -p "$wheels" "$cache"
# Already staged? (each pin of the lock has one of its sha256s here): pip download would still ask the index.
if python3 - "$lock" "$wheels" <<'PY'
import hashlib, pathlib, re, sys
blocks = re.split(r"\n(?=[A-Za-z0-9])", open(sys.argv[1], encoding="utf-8").read())
wanted = [set(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)) for block in blocks]
have = {hashlib.sha256(p.read_bytes()).hexdigest() for p in pathlib.Path(sys.argv[2]).iterdir() if p.is_file()}
sys.exit(0 if all(hashes & have for hashes in wanted if hashes) else 1)
PY
then
  echo "every file of $lock is already staged in $wheels"
else
read -r -a extra <<<"$(torch_source_args python3 "$lock")"
python3 -m pip download --quiet --no-deps --require-hashes "${extra[@]}" -d "$wheels" -r "$lock" 2>&1 \
  | grep -v "is ignored: it is neither a file nor a directory" || true
count=$(find "$wheels" -name '*.whl' -o -name '*.tar.gz' | wc -l)
expected=$(grep -cE '^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^]]*\])?==' "$lock")
[ "$count" -ge "$expected" ] || { echo "Error: staged $count wheels of $expected in $lock into $wheels; see pip's message above (torch +cpu: CAPSULE_TORCH_INDEX=$torch_index)" >&2; exit 2; }
fi
CAPSULE_CACHE="$cache" "$capsule" fetch all >/dev/null
CAPSULE_CACHE="$cache" "$(dirname "$capsule")/python" -c \
  'from capsule.artifacts.cache import scorer_data_dir; from ifeval_scorer.nltk_data import materialize; materialize(scorer_data_dir())'
echo "staged $lock in $wheels ($(du -sh "$wheels" | cut -f1)) and the pinned artifacts ($(du -sh "$cache" | cut -f1))"

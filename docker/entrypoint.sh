#!/usr/bin/env bash
# The images' entrypoint: `docker run IMAGE ARGS...` runs `capsule ARGS...`, with three rules for
# `reproduce` (every other command, and any `--help`, passes straight through):
# 1. The study directory (results, prereg, models, keys) must be a volume: a signed run written into
#    the container alone would vanish with it. Without one, one line shows the `docker run` flags to
#    add, before anything is loaded. (`--dry-run` writes nothing signed and needs none.)
# 2. In the GPU image, `reproduce` without --plan runs the newest sealed plan of $CAPSULE_GPU_MODEL
#    (read from the ledger: `capsule prereg newest`), and only when a GPU is visible; without one it
#    says in one line to use capsule-cpu or name a CPU plan. The CPU image runs the embedded default.
# 3. On first use of an empty study volume (any command), the image's sealed plans and ledger are
#    copied into it (never over an existing prereg/); commands run in the study directory; a
#    signing key in keys/ is used by reproduce when present.
# Paths come from the environment so tests/unit/test_docker_entrypoint.py runs this without Docker.
set -euo pipefail

study=${CAPSULE_STUDY:-/home/capsule/study}
kind=${CAPSULE_IMAGE_KIND:-cpu}
seed=${CAPSULE_SEED_DIR:-/opt/capsule}
mountinfo=${CAPSULE_MOUNTINFO:-/proc/self/mountinfo}
devdir=${CAPSULE_DEV_DIR:-/dev}
if [ "$kind" = gpu ]; then image=capsule; gpus="--gpus all "; else image=capsule-cpu; gpus=""; fi
flags="${gpus}-v \"\$PWD/study:$study\""

die() { echo "Error: $*" >&2; exit 2; }
has() { local want=$1; shift; local a; for a in "$@"; do [ "$a" = "$want" ] && return 0; done; return 1; }
# Whether PATH or a directory above it (below /) is a mount point in this container.
on_volume() {
  local path=$1 points
  points=$(awk '{print $5}' "$mountinfo" 2>/dev/null || true)
  while [ "$path" != / ] && [ -n "$path" ]; do
    if grep -qxF -- "$path" <<<"$points"; then return 0; fi
    path=$(dirname "$path")
  done
  return 1
}
gpu_visible() { compgen -G "$devdir/nvidia[0-9]*" >/dev/null; }
seed_study() {  # a study volume's first use: the image's plans and ledger, never over existing ones
  if [ ! -e "$study/prereg/ledger.jsonl" ] && [ -d "$seed/prereg" ]; then
    mkdir -p "$study/prereg"
    cp -r "$seed/prereg/." "$study/prereg/"
    echo "study: copied the image's sealed plans and ledger into $study/prereg (first use)" >&2
  fi
  # the manifest schema: the installed capsule reads manifests/ from the working directory (the study),
  # which a mounted volume hides (found 2026-12-02: "manifest schema not found" before the first arm)
  if [ ! -e "$study/manifests/schema.json" ] && [ -d "$seed/manifests" ]; then
    cp -r "$seed/manifests" "$study/" 2>/dev/null || true
  fi
}

if has --help "$@" || has -h "$@"; then exec capsule "$@"; fi
if [ "${1:-}" != reproduce ]; then
  seed_study
  cd "$study"
  exec capsule "$@"
fi
shift
dry=0; has --dry-run "$@" && dry=1
named=0; for a in "$@"; do case $a in --plan | --plan=*) named=1 ;; esac; done
if [ "$dry" = 0 ] && ! { on_volume "$study/results" && on_volume "$study/prereg"; }; then
  die "no study volume at $study: its signed run would vanish with the container; mkdir -p study and add ${flags} (results/, prereg/, models/, keys/ live there)"
fi
if [ "$dry" = 0 ] && [ ! -w "$study" ] && [ ! -w "$study/results" ]; then
  die "$study is not writable by uid $(id -u); chown the mounted study directory to that user"
fi
if [ "$kind" = gpu ] && [ "$named" = 0 ] && [ "$dry" = 0 ] && ! gpu_visible; then
  die "no GPU visible (add --gpus all on a host with the NVIDIA Container Toolkit); for the CPU study use capsule-cpu (docker run -v \"\$PWD/study:$study\" capsule-cpu reproduce) or name a CPU plan: reproduce --plan prereg/smollm2-135m-v3"
fi
seed_study
mkdir -p "$study/results" 2>/dev/null || true
if [ -z "${CAPSULE_SIGNING_KEY:-}" ] && [ -f "$study/keys/signing.key.pem" ]; then
  export CAPSULE_SIGNING_KEY="$study/keys/signing.key.pem"
fi
if [ "$kind" = gpu ] && [ "$named" = 0 ]; then
  plan=$(cd "$study" && capsule prereg newest --model "${CAPSULE_GPU_MODEL:?the GPU image sets CAPSULE_GPU_MODEL}")
  echo "study: the newest sealed plan of ${CAPSULE_GPU_MODEL}: $plan" >&2
  set -- --plan "$plan" "$@"
fi
cd "$study"
exec capsule reproduce "$@"

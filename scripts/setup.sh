#!/usr/bin/env bash
# `make setup`: check what the lock needs, then scripts/setup_cpu_venv.sh PYTHON VENV.
# requirements/cpu.lock covers CPython 3.11 on Linux x86-64 (manylinux wheels); a missing or other
# python, or another platform, is one Error line (exit 2) before anything is made. Its torch `+cpu`
# comes from a local wheel in pip's find-links, else from the PyTorch CPU index, handed to pip as
# PIP_EXTRA_INDEX_URL only then (scripts/torch_source.sh), so where the wheel is local nothing changes.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
python=${1:-python3.11}
venv=${2:-.venv}
platform="${CAPSULE_PLATFORM:-$(uname -s)-$(uname -m)}"
die() { echo "Error: $*" >&2; exit 2; }

[ "$platform" = Linux-x86_64 ] \
  || die "requirements/cpu.lock covers Linux x86-64 only, this is $platform; use the capsule-cpu image (docker run --platform linux/amd64 ...) or see docs/install.md 'Platforms'"
command -v "$python" >/dev/null 2>&1 \
  || die "$python not found; install Python 3.11 (Debian/Ubuntu: apt-get install python3.11 python3.11-venv; or uv python install 3.11) or pass PYTHON=/path/to/python3.11 to make"
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
  || die "$python is not Python 3.11 (the lock is resolved for CPython 3.11); pass PYTHON=/path/to/python3.11 to make"

# shellcheck source=scripts/torch_source.sh
source "$here/torch_source.sh"
read -r -a source_args <<<"$(torch_source_args "$python" "${CAPSULE_LOCK:-requirements/cpu.lock}")"
if [ "${#source_args[@]}" -gt 0 ]; then
  echo "torch: no local wheel of the lock's +cpu build; pip adds ${source_args[1]}"
  export PIP_EXTRA_INDEX_URL="${source_args[1]}${PIP_EXTRA_INDEX_URL:+ $PIP_EXTRA_INDEX_URL}"
fi
exec bash "$here/setup_cpu_venv.sh" "$python" "$venv"

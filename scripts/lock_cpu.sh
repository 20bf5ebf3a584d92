#!/usr/bin/env bash
# Re-resolve requirements/cpu.lock (`make lock-cpu`): install the CPU stack as pyproject.toml declares
# it into a scratch environment, freeze what landed, and pin each distribution to the file pip chose,
# by sha256. Needs the package index (and /opt/wheels, where this machine keeps the torch CPU build).
# The result is what `make setup` then installs, byte for byte, until the lock is refreshed again.
set -euo pipefail

python=${1:-python3.11}
out=${2:-requirements/cpu.lock}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

"$python" -m venv "$scratch/venv"
pip=("$scratch/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip setuptools
# torch first: the CPU build (a plain `torch` would resolve to a CUDA build of several GB)
"${pip[@]}" install --quiet torch==2.13.0
"${pip[@]}" install --quiet '.[cpu,dev]'
# the packages scripts/setup_cpu_venv.sh lists as deliberately absent
"${pip[@]}" uninstall --quiet -y capsule torchvision torchaudio torchcodec || true
# Google's IFEval code as shipped on PyPI: the scorer's parity reference, tests only, without its deps
"${pip[@]}" install --quiet --no-deps lm-eval==0.4.13
"${pip[@]}" freeze --all --exclude-editable > "$scratch/freeze.txt"
"${pip[@]}" install --quiet --dry-run --ignore-installed --no-deps --report "$scratch/report.json" \
  -r "$scratch/freeze.txt"
(cd requirements && "$scratch/venv/bin/python" write_lock.py "$scratch/report.json" ../pyproject.toml "../$out")
echo "wrote $out: $(grep -c -- '--hash=' "$out") distributions"

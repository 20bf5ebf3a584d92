"""Shared test fixtures: the pinned prompt file, the ../shared fixtures, the embedded model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_BESIDE_CHECKOUT = REPO.parent / "shared"  # where CI and our checkouts lay ../shared


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture()
def repo_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repository root holding a copy of prereg/ (plans and the real ledger), made the
    working directory, with its own config directory and no signing key from the environment."""
    shutil.copytree(REPO / "prereg", tmp_path / "prereg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def prompts_path() -> Path:
    """The verified IFEval prompt file (fetched into the cache on first use)."""
    from capsule.artifacts.pinned_prompts import fetch_prompts

    return fetch_prompts().path


@pytest.fixture(scope="session")
def gpt4_fixture() -> Path:
    """Google's published GPT-4 responses (never committed), fetched like any pinned artifact:
    `$CAPSULE_SHARED/ifeval/`, `../shared/ifeval/`, the cache, then Google's URL, each sha256-verified.
    With none reachable the tests that need it are skipped, with the reason, instead of failing."""
    from capsule.artifacts.gpt4_responses import fetch_gpt4_responses
    from capsule.errors import UnavailableError

    try:
        return fetch_gpt4_responses([SHARED_BESIDE_CHECKOUT]).path
    except UnavailableError as error:
        reason = str(error).split(" (")[0]  # the full list of sources tried is in the error itself
        pytest.skip(f"{reason}: not in $CAPSULE_SHARED, ../shared/ifeval or the cache, and no internet")


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The dequantized embedded model directory (built once into the cache)."""
    from capsule.artifacts.embedded_model import fetch_model

    return fetch_model()[0]

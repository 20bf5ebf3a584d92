"""Shared test fixtures: the pinned prompt file, the ../shared fixtures, the embedded model."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CAPSULE_SHARED", REPO.parent / "shared"))
GPT4_FIXTURE = SHARED / "ifeval" / "input_response_data_gpt4_20231107_145030.jsonl"
GPT4_FIXTURE_SHA256 = "c325955b1f139ceb5d3fdf7828b163a5e13d9a3bdbdec15fe1f9fac9a651bd27"


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
    """Google's published GPT-4 responses, read from ../shared (never committed)."""
    if not GPT4_FIXTURE.exists():
        pytest.fail(f"{GPT4_FIXTURE} missing: CI lays ../shared beside the clone")
    return GPT4_FIXTURE


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The dequantized embedded model directory (built once into the cache)."""
    from capsule.artifacts.embedded_model import fetch_model

    return fetch_model()[0]

"""`capsule fetch --plan DIR` for a hub model: downloaded at the plan's revision (fake hub, no network),
every file checked against the plan; a mismatch is refused (exit 3) and never reaches the model
directory; the directory route (`--model-dir`, `$CAPSULE_MODELS`) is where the files go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hub_fixture import COMMIT, REPO, TINY_MODEL, FakeHubApi, sha256

from capsule.artifacts import hub
from capsule.cli import cli

PINNED = sorted(n for n in TINY_MODEL if n != "README.md")


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture()
def hub_plan(repo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plan of the fake hub model, written by `capsule plan new` from its hub metadata."""
    monkeypatch.setattr(hub, "hub_api", lambda: FakeHubApi())
    result = _invoke(
        "plan", "new", "tiny-hub", "--model", f"{REPO}@{COMMIT}", "--claim", "50", "--reading",
        "prompt_level_strict_acc", "--source", "https://example.org", "--tok-per-s", "100",
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    return repo_copy / "prereg" / "tiny-hub"


def _serve(monkeypatch: pytest.MonkeyPatch, api: FakeHubApi) -> FakeHubApi:
    monkeypatch.setattr(hub, "hub_api", lambda: api)
    return api


def test_hub_model_is_downloaded_at_the_revision_and_verified(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = _serve(monkeypatch, FakeHubApi())
    target = tmp_path / "models" / "tiny-instruct"
    result = _invoke("fetch", "model", "--plan", str(hub_plan), "--model-dir", str(target))
    assert result.exit_code == 0, result.output + result.stderr
    assert api.snapshots == [PINNED]  # only the pinned files, not the README
    assert sorted(p.name for p in target.iterdir()) == PINNED
    assert all(sha256((target / n).read_bytes()) == sha256(TINY_MODEL[n]) for n in PINNED)
    assert f"downloaded {len(PINNED)} file(s) at {COMMIT}" in result.output
    assert not (target.parent / ".tiny-instruct.download").exists()
    again = _invoke("fetch", "model", "--plan", str(hub_plan), "--model-dir", str(target))
    assert again.exit_code == 0 and "already present" in again.output
    assert len(api.snapshots) == 1  # nothing downloaded twice


def test_the_models_env_names_the_store(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve(monkeypatch, FakeHubApi())
    monkeypatch.setenv("CAPSULE_MODELS", str(tmp_path / "store"))
    result = _invoke("fetch", "model", "--plan", str(hub_plan))
    assert result.exit_code == 0, result.output + result.stderr
    assert (tmp_path / "store" / "tiny-instruct" / "model.safetensors").is_file()


def test_a_mismatched_download_is_refused_and_kept_out_of_the_model_directory(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve(monkeypatch, FakeHubApi(corrupt=("model.safetensors",)))
    target = tmp_path / "models" / "tiny-instruct"
    result = _invoke("fetch", "model", "--plan", str(hub_plan), "--model-dir", str(target))
    assert result.exit_code == 3, result.output
    line = result.stderr.strip().splitlines()[-1]  # after the "downloading ..." progress line
    assert line.startswith("Error: model.safetensors: sha256 ")
    expected, actual = sha256(TINY_MODEL["model.safetensors"]), sha256(TINY_MODEL["model.safetensors"] + b"!")
    assert f"sha256 {actual}, the plan pins {expected}" in line
    assert not target.exists()  # nothing of the bad download is where the capsule loads from
    staging = target.parent / ".tiny-instruct.download"
    assert (staging / "model.safetensors.corrupt-1").is_file() and not (
        staging / "model.safetensors"
    ).exists()


def test_a_wrong_file_already_there_is_set_aside_and_fetched_again(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = _serve(monkeypatch, FakeHubApi())
    target = tmp_path / "tiny-instruct"
    target.mkdir()
    (target / "config.json").write_bytes(b"{}")
    (target / "tokenizer.json").write_bytes(TINY_MODEL["tokenizer.json"])  # already right: kept
    result = _invoke("fetch", "model", "--plan", str(hub_plan), "--model-dir", str(target))
    assert result.exit_code == 0, result.output + result.stderr
    assert "moved aside to config.json.corrupt-1" in result.stderr
    assert api.snapshots == [[n for n in PINNED if n != "tokenizer.json"]]
    assert (target / "config.json").read_bytes() == TINY_MODEL["config.json"]


def test_no_network_points_to_the_directory_route(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Offline(FakeHubApi):
        def snapshot_download(self, **kwargs: Any) -> str:
            raise OSError("Network is unreachable")

    _serve(monkeypatch, Offline())
    result = _invoke("fetch", "model", "--plan", str(hub_plan), "--model-dir", str(tmp_path / "m"))
    assert result.exit_code == 2
    assert "Network is unreachable" in result.stderr and "--model-dir" in result.stderr


def test_model_dir_without_a_plan_is_refused(tmp_path: Path) -> None:
    result = _invoke("fetch", "model", "--model-dir", str(tmp_path))
    assert result.exit_code == 2 and "--model-dir goes with --plan" in result.stderr

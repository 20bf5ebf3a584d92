"""`capsule reproduce` fetches a hub model's missing pinned files itself (issue 37, finding 2: the one
documented docker command stopped at "model directory not found"); with no network it says, in one
line, which command fetches them and where they belong. Fake hub, no network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hub_fixture import COMMIT, REPO, TINY_MODEL, FakeHubApi, sha256

from capsule.artifacts import hub
from capsule.artifacts.model_store import ensure_model_dir, missing_pinned
from capsule.cli import cli
from capsule.errors import UnavailableError
from capsule.prereg.loader import load_plan

PINNED = sorted(n for n in TINY_MODEL if n != "README.md")


@pytest.fixture()
def hub_plan(repo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plan of the fake hub model, written by `capsule plan new` from its hub metadata."""
    monkeypatch.setattr(hub, "hub_api", lambda: FakeHubApi())
    result = CliRunner().invoke(cli, [
        "plan", "new", "tiny-hub", "--model", f"{REPO}@{COMMIT}", "--claim", "50", "--reading",
        "prompt_level_strict_acc", "--source", "https://example.org", "--tok-per-s", "100",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    return repo_copy / "prereg" / "tiny-hub"


def test_missing_weights_are_fetched_before_the_run(hub_plan: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeHubApi()
    monkeypatch.setattr(hub, "hub_api", lambda: api)
    model = load_plan(hub_plan / "plan.toml").model
    target = tmp_path / "models" / "tiny-instruct"
    assert missing_pinned(model, target) == PINNED
    said: list[str] = []
    directory = ensure_model_dir(model, target, hub_plan, said.append)
    assert directory == target and missing_pinned(model, target) == []
    assert all(sha256((target / n).read_bytes()) == sha256(TINY_MODEL[n]) for n in PINNED)
    assert said[0].startswith(f"model: {target} lacks {len(PINNED)} of the plan's {len(PINNED)} pinned files")
    assert ensure_model_dir(model, target, hub_plan, said.append) == target and len(api.snapshots) == 1


def test_no_network_names_the_fetch_command_and_the_directory(hub_plan: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    class Offline(FakeHubApi):
        def snapshot_download(self, **kwargs: Any) -> str:
            raise OSError("Network is unreachable")

    monkeypatch.setattr(hub, "hub_api", lambda: Offline())
    model = load_plan(hub_plan / "plan.toml").model
    target = tmp_path / "models" / "tiny-instruct"
    with pytest.raises(UnavailableError) as refused:
        ensure_model_dir(model, target, hub_plan, lambda line: None)
    message = str(refused.value)
    assert "\n" not in message and refused.value.exit_code == 2
    assert f"capsule fetch model --plan {hub_plan}" in message and str(target) in message
    assert not target.exists() or not any(target.iterdir())  # nothing half-written in the model directory

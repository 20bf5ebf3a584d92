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


# ---- issue 26, finding 3: [model.files] keys are plain file names, checked by loader and fetcher -----

ESCAPES = ("../../outside.json", "/ABS/outside.json", "sub/config.json", ".hidden.json", "x\n.json")


def _with_pinned(plan: Path, name: str, digest: str) -> None:
    text = (plan / "plan.toml").read_text(encoding="utf-8")
    line = f"{name!r} = {digest!r}\n".replace("'", '"') if "\n" not in name else f'"x\\n.json" = "{digest}"\n'
    pinned = text.replace("[model.files]\n", "[model.files]\n" + line)
    (plan / "plan.toml").write_text(pinned, encoding="utf-8")


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_model_file_key_that_is_a_path_is_refused_by_the_loader(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, escape: str
) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}", encoding="utf-8")
    name = escape.replace("/ABS", str(tmp_path))
    _with_pinned(hub_plan, name, sha256(b"not it"))
    api = _serve(monkeypatch, FakeHubApi())
    target = tmp_path / "models" / "deep" / "tiny-instruct"
    for args in (
        ("fetch", "model", "--plan", str(hub_plan), "--model-dir", str(target)),
        ("prereg", "seal", str(hub_plan), "--note", "escape"),
    ):
        result = _invoke(*args)
        assert result.exit_code == 2, result.output + result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and str(hub_plan / "plan.toml") in errors[0], result.stderr
        assert "[model.files]" in errors[0] and "plain file name" in errors[0]
    assert outside.read_text(encoding="utf-8") == "{}" and not list(tmp_path.rglob("*.corrupt-*"))
    assert api.snapshots == [] and not (tmp_path / "models").exists()


def test_the_fetcher_checks_the_names_again_before_touching_a_file(
    hub_plan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Model built in code (not through the loader) with an escaping name: the fetcher and the
    verifier refuse it before renaming, reading or downloading anything."""
    from dataclasses import replace

    from capsule.artifacts.model_store import verify_pinned_files
    from capsule.errors import BadInputError
    from capsule.prereg.loader import load_plan

    outside = tmp_path / "outside.json"
    outside.write_text("{}", encoding="utf-8")
    target = tmp_path / "models" / "tiny-instruct"
    target.mkdir(parents=True)
    model = load_plan(hub_plan).model
    bad = replace(model, files={**model.files, "../outside.json": sha256(b"not it")})
    api = _serve(monkeypatch, FakeHubApi())
    with pytest.raises(BadInputError, match="plain file name"):
        hub.fetch_hub_model(bad, target)
    with pytest.raises(BadInputError, match="plain file name"):
        verify_pinned_files(target, bad.files)
    assert outside.read_text(encoding="utf-8") == "{}" and not list(tmp_path.glob("outside.json.corrupt-*"))
    assert api.snapshots == [] and list(target.iterdir()) == []

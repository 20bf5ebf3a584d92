"""`capsule verify` through click's CliRunner: exit 0 with one line, exit 3 with the first failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from test_bundle import Study, build_study

from capsule.cli import cli
from capsule.evidence.signing import generate_keypair
from capsule.run_dir import PUBLIC_KEY


@pytest.fixture
def study(tmp_path: Path) -> Study:
    """One bundled run with its own ledger under tmp_path."""
    return build_study(tmp_path)


def _run(study: Study, *extra: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["verify", str(study.run_dir), "--ledger", str(study.ledger_path), *extra])


def test_good_bundle_exits_0_with_one_line(study: Study) -> None:
    result = _run(study)
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("OK run run-1")
    assert f"included key {PUBLIC_KEY}" in lines[0] and study.result.fingerprint[:16] in lines[0]


def test_given_key_is_named(study: Study) -> None:
    result = _run(study, "--key", str(study.run_dir / PUBLIC_KEY))
    assert result.exit_code == 0, result.output
    assert "given key" in result.stdout


def test_default_ledger_is_prereg_ledger_jsonl(
    study: Study, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # build_study put the ledger at tmp_path/prereg/ledger.jsonl
    result = CliRunner().invoke(cli, ["verify", str(study.run_dir)])
    assert result.exit_code == 0, result.output


def test_tampered_file_exits_3_naming_what_differs(study: Study) -> None:
    scores = study.run_dir / "scores" / "greedy.jsonl"
    scores.write_bytes(scores.read_bytes().replace(b"true", b"fals"))
    result = _run(study)
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: scores/greedy.jsonl: sha256 ")
    assert "on disk" in lines[0] and "in the bundle" in lines[0]


def test_wrong_key_exits_3(study: Study, tmp_path: Path) -> None:
    _, public, _ = generate_keypair(tmp_path / "other")
    result = _run(study, "--key", str(public))
    assert result.exit_code == 3 and "no signature by key" in result.stderr


def test_missing_run_dir_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["verify", str(tmp_path / "nope")])
    assert result.exit_code == 2

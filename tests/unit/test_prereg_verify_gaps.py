"""`capsule prereg verify` fails, one line and exit 3, when something sealed disappears or is reached
through a symlink, when a bundled run is missing, and when an entry's field has the wrong JSON type;
a ledger that does not exist is exit 2, in a checkout or outside one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from ledger_rewrite import read_entries, write_rechained
from test_bundle import PLAN_BYTES, Study, build_study

from capsule.cli import cli
from capsule.hashing import canonical_json
from capsule.prereg.chain import entry_hash
from capsule.prereg.sealing import seal_plan

REPO = Path(__file__).resolve().parents[2]


def verify(*args: str) -> Result:
    return CliRunner().invoke(cli, ["prereg", "verify", *args])


def refused(result: Result, *needles: str) -> str:
    """Assert exit 3 with one `Error:` line holding every needle; the line."""
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in result.output, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repo root (not a git checkout) with the smoke plan sealed; cwd is the root."""
    shutil.copytree(REPO / "prereg" / "smoke", tmp_path / "prereg" / "smoke")
    monkeypatch.chdir(tmp_path)
    seal_plan(Path("prereg/smoke"), "seal smoke", Path("prereg/ledger.jsonl"))
    assert verify().exit_code == 0
    return tmp_path


def test_a_missing_companion_fails(repo: Path) -> None:
    (repo / "prereg/smoke/controls/compliant.jsonl").unlink()
    refused(verify(), "seq 1: seal of prereg/smoke/controls/compliant.jsonl", "is missing from the checkout")


def test_a_missing_plan_fails(repo: Path) -> None:
    (repo / "prereg/smoke/plan.toml").unlink()
    refused(verify(), "seq 3: seal of prereg/smoke/plan.toml", "missing")


def test_a_missing_plan_directory_fails(repo: Path) -> None:
    shutil.rmtree(repo / "prereg/smoke")
    refused(verify(), "seq 1:", "the whole directory prereg/smoke)", "missing")


def test_a_sealed_file_behind_a_symlink_fails(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    rationale = repo / "prereg/smoke/rationale.md"
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "rationale.md"
    shutil.copy(rationale, elsewhere)  # the same bytes: only the link is wrong
    rationale.unlink()
    rationale.symlink_to(elsewhere)
    refused(verify(), "seq 2:", "prereg/smoke/rationale.md is reached through the symlink")


def test_a_plan_directory_behind_a_symlink_fails(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    moved = tmp_path_factory.mktemp("elsewhere") / "smoke"
    shutil.move(repo / "prereg/smoke", moved)
    os.symlink(moved, repo / "prereg/smoke")
    refused(verify(), "seq 1:", "through the symlink", "prereg/smoke")


def bundled_study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Study:
    """build_study's ledger and run, with the plan files its entries record put in place."""
    study = build_study(tmp_path)
    (tmp_path / "prereg/other").mkdir(parents=True)
    (tmp_path / "prereg/other/plan.toml").write_bytes(b"other")
    (tmp_path / "prereg/demo").mkdir(parents=True)
    (tmp_path / "prereg/demo/plan.toml").write_bytes(PLAN_BYTES)
    monkeypatch.chdir(tmp_path)
    return study


def test_a_bundled_run_missing_from_the_checkout_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = bundled_study(tmp_path, monkeypatch)
    assert verify().exit_code == 0, verify().output
    shutil.rmtree(study.run_dir)
    seq = study.result.ledger_entry.seq if study.result.ledger_entry else None
    refused(verify(), f"seq {seq}: run run-1 is recorded as bundled", "missing from the checkout")


WRONG_TYPES: list[tuple[int, str, Any, str]] = [  # (entry index, field, value, expected words)
    (0, "seq", True, "seq True is not an integer"),
    (0, "seq", 1.0, "seq 1.0 is not an integer"),
    (0, "seq", "1", "seq '1' is not an integer"),
    (0, "path", 5, "must be a string"),
    (0, "path", ["a"], "must be a string"),
    (0, "kind", 7, "kind 7 is not a string"),
    (0, "prev", None, "prev None is not a string"),
    (0, "note", 3, "note must be a string"),
    (0, "time", 0, "is not UTC ISO-8601"),
    (0, "sha256", 1, "sha256 must be a full hex digest"),
    (2, "companions", ["prereg/smoke/rationale.md"], "companions must map paths to full hex digests"),
    (2, "companions", {"prereg/smoke/rationale.md": 1}, "companions must map paths to full hex digests"),
]


@pytest.mark.parametrize(
    ("index", "field", "value", "words"), WRONG_TYPES, ids=[f"{f}={v!r}" for _, f, v, _ in WRONG_TYPES]
)
def test_a_field_of_the_wrong_type_fails(repo: Path, index: int, field: str, value: Any, words: str) -> None:
    """Each entry re-chained (valid hashes), so only the type check can refuse it; `seq: true` among
    them (a bool is an int in Python)."""
    ledger = repo / "prereg/ledger.jsonl"
    entries = read_entries(ledger)
    write_rechained(ledger, entries)
    entries = read_entries(ledger)
    entries[index][field] = value
    entries[index]["hash"] = entry_hash(entries[index])  # this entry's own hash made valid again
    ledger.write_bytes(b"".join(canonical_json(e) + b"\n" for e in entries))
    refused(verify(), f"seq {index + 1}:", words)


def test_redact_and_signers_fields_of_the_wrong_type_fail(repo: Path) -> None:
    ledger = repo / "prereg/ledger.jsonl"
    entries = read_entries(ledger)
    base = {k: v for k, v in entries[2].items() if k not in ("companions", "hash")}
    cases = [
        ({**base, "kind": "signers", "fingerprints": "ab" * 32}, "fingerprints must be a non-empty list"),
        ({**base, "kind": "signers", "fingerprints": []}, "fingerprints must be a non-empty list"),
        ({**base, "kind": "signers", "fingerprints": ["AB" * 32]}, "fingerprints must be a non-empty list"),
        ({**base, "kind": "signers", "path": "prereg/smoke/rationale.md", "sha256": entries[1]["sha256"],
          "fingerprints": ["ab" * 32]}, "not a sealed plan's latest recorded hash"),
        ({**base, "kind": "redact", "sealed_sha256": base["sha256"], "offsets": [True], "occurrences": 1,
          "token_bytes": 1, "file_bytes": 1}, "offsets must be a list of non-negative integers"),
        ({**base, "kind": "redact", "sealed_sha256": base["sha256"], "offsets": [0], "occurrences": "1",
          "token_bytes": 1, "file_bytes": 1}, "occurrences '1' is not a non-negative integer"),
    ]
    for extra, words in cases:
        write_rechained(ledger, entries + [extra])
        refused(verify(), "seq 4:", words)


def test_a_missing_ledger_is_bad_input(repo: Path, tmp_path_factory: pytest.TempPathFactory,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    result = verify("--ledger", "prereg/nope.jsonl")
    assert result.exit_code == 2 and "ledger prereg/nope.jsonl does not exist" in result.stderr
    directory = verify("--ledger", "prereg")
    assert directory.exit_code == 2 and "is not a file" in directory.stderr
    monkeypatch.chdir(tmp_path_factory.mktemp("not-a-checkout"))
    outside = verify()
    assert outside.exit_code == 2 and "ledger prereg/ledger.jsonl does not exist" in outside.stderr

"""`capsule prereg` through click: seal, amend, redact (round trip), verify, and their refusals."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from capsule.cli import cli
from capsule.errors import VerificationError
from capsule.hashing import sha256_bytes
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import RedactEntry
from capsule.prereg.sealed_plan import open_sealed_plan
from capsule.prereg.sealing import confirm_redaction


@pytest.fixture
def repo(tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repo root with copies of the smoke and smollm2 plans and no ledger; cwd is the root."""
    for study in ("smoke", "smollm2-135m"):
        shutil.copytree(repo_root / "prereg" / study, tmp_path / "prereg" / study)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["prereg", *args])


def seal_both() -> None:
    for study in ("smoke", "smollm2-135m"):
        result = run("seal", f"prereg/{study}", "--note", f"seal {study}")
        assert result.exit_code == 0, result.output


def make_amendment(repo: Path, reason: str = "use 40 new tokens") -> Path:
    new = repo / "prereg" / "smoke-v2"
    shutil.copytree(repo / "prereg" / "smoke", new)
    text = (new / "plan.toml").read_text()
    text = text.replace(
        'name = "smoke"',
        f'name = "smoke-v2"\namends = "prereg/smoke/plan.toml"\namend_reason = "{reason}"',
        1,
    )
    (new / "plan.toml").write_text(text.replace("max_new_tokens = 48", "max_new_tokens = 40"))
    return new / "plan.toml"


def test_seal_then_verify(repo: Path) -> None:
    seal_both()
    result = run("verify")
    assert result.exit_code == 0 and "OK: 6 entries" in result.output
    again = run("seal", "prereg/smoke", "--note", "again")
    assert again.exit_code == 0 and "nothing appended" in again.output
    assert len(Ledger.load(Path("prereg/ledger.jsonl")).entries) == 6


def test_seal_refuses_invalid_plan_and_edited_plan(repo: Path) -> None:
    plan = repo / "prereg" / "smoke" / "plan.toml"
    original = plan.read_text()
    plan.write_text(original.replace("temperature = 0.0", "temprature = 0.0", 1))
    result = run("seal", "prereg/smoke", "--note", "x")
    assert result.exit_code == 2 and "unknown key 'temprature'" in result.output
    assert not (repo / "prereg" / "ledger.jsonl").exists()  # validated before anything was written
    plan.write_text(original)
    seal_both()
    plan.write_text(original.replace("Tiny end-to-end", "Small end-to-end", 1))
    edited = run("seal", "prereg/smoke", "--note", "x")
    assert edited.exit_code == 3 and "seal an amendment" in edited.output  # the ledger no longer verifies
    assert run("verify").exit_code == 3


def test_amend_round_trip(repo: Path) -> None:
    seal_both()
    new = make_amendment(repo)
    wrong = run("amend", str(new), "--of", "prereg/smoke/plan.toml", "--reason", "something else")
    assert wrong.exit_code == 2 and "differ" in wrong.output
    result = run("amend", str(new), "--of", "prereg/smoke/plan.toml", "--reason", "use 40 new tokens")
    assert result.exit_code == 0, result.output
    entries = Ledger.load(Path("prereg/ledger.jsonl")).entries
    amend = entries[-1]
    assert (
        amend.kind == "amend"
        and amend.of == "prereg/smoke/plan.toml"
        and amend.note == "use 40 new tokens"
    )
    assert entries[2].path == "prereg/smoke/plan.toml"  # the old entry stays
    assert run("verify").exit_code == 0
    assert open_sealed_plan(new).seal.seq == amend.seq


def test_amend_refuses_unsealed_or_mismatched(repo: Path) -> None:
    new = make_amendment(repo)
    unsealed = run("amend", str(new), "--of", "prereg/smoke/plan.toml", "--reason", "use 40 new tokens")
    assert unsealed.exit_code == 2 and "not a sealed plan" in unsealed.output
    seal_both()
    other = run("amend", str(new), "--of", "prereg/smollm2-135m/plan.toml", "--reason", "use 40 new tokens")
    assert other.exit_code == 2 and "must agree" in other.output
    plain = run("seal", str(new), "--note", "x")
    assert plain.exit_code == 2 and "prereg amend" in plain.output


def test_redaction_round_trip(repo: Path) -> None:
    seal_both()
    rationale = repo / "prereg" / "smoke" / "rationale.md"
    original = rationale.read_bytes()
    token = "first-time user"
    assert original.count(token.encode()) == 1
    result = run("redact", str(rationale), "--token", token, "--with", "x" * len(token), "--reason", "test")
    assert result.exit_code == 0, result.output
    assert run("verify").exit_code == 0
    entry = Ledger.load(Path("prereg/ledger.jsonl")).entries[-1]
    current = rationale.read_bytes()
    assert entry.sealed_sha256 == sha256_bytes(original) and entry.sha256 == sha256_bytes(current)
    assert (
        entry.occurrences == 1
        and entry.token_bytes == len(token)
        and entry.file_bytes == len(original)
    )
    confirm_redaction(entry, original, current)
    saved = repo / "original.md"
    saved.write_bytes(original)
    confirmed = run("confirm-redaction", str(saved), "--seq", str(entry.seq))
    assert confirmed.exit_code == 0 and "confirmed" in confirmed.output
    saved.write_bytes(original.replace(b"wiring", b"wirinG"))
    assert run("confirm-redaction", str(saved), "--seq", str(entry.seq)).exit_code == 3
    for seq in (entry.seq - 1, entry.seq + 1, 0):  # a seal entry, past the end, before the first
        wrong = run("confirm-redaction", str(saved), "--seq", str(seq))
        assert wrong.exit_code == 2 and f"seq {seq} is not a redact entry" in wrong.output, wrong.output
    assert open_sealed_plan(Path("prereg/smoke")).seal.kind == "seal"  # the plan itself is untouched


def test_an_edit_beside_a_redaction_is_refused(repo: Path) -> None:
    """The case same-length redaction protects (capsule/prereg/sealing.py): a redact entry whose
    recorded hash is of a file also changed outside the redacted spans. From the original, the one
    list of offsets gives the token and the replacement, and the rebuilt file differs from it."""
    seal_both()
    rationale = repo / "prereg" / "smoke" / "rationale.md"
    original = rationale.read_bytes()
    token = "first-time user"
    redacted = run("redact", str(rationale), "--token", token, "--with", "x" * len(token), "--reason", "r")
    assert redacted.exit_code == 0, redacted.output
    entry = Ledger.load(Path("prereg/ledger.jsonl")).entries[-1]
    current = rationale.read_bytes()
    assert isinstance(entry, RedactEntry)
    (offset,) = entry.offsets
    assert current[offset : offset + entry.token_bytes] == b"x" * len(token)  # the span, in this file
    assert len(current) == entry.file_bytes == len(original)
    smuggled = current.replace(b"wiring", b"wirinG", 1)
    assert smuggled != current and len(smuggled) == len(current)
    # as if the entry had recorded the edited file
    forged = dataclasses.replace(entry, sha256=sha256_bytes(smuggled))
    with pytest.raises(VerificationError, match="does not turn the original into the current file"):
        confirm_redaction(forged, original, smuggled)
    confirm_redaction(entry, original, current)


def test_redaction_refusals(repo: Path) -> None:
    seal_both()
    plan = "prereg/smoke/plan.toml"
    different_length = run("redact", plan, "--token", "Tiny", "--with", "Small", "--reason", "r")
    assert different_length.exit_code == 2 and "same length" in different_length.output
    setting = run(
        "redact", plan, "--token", "max_new_tokens = 48", "--with", "max_new_tokens = 40", "--reason", "r"
    )
    assert setting.exit_code == 2 and "changes a setting" in setting.output
    control = run(
        "redact", "prereg/smoke/controls/compliant.jsonl", "--token", "Ava", "--with", "Eve", "--reason", "r"
    )
    assert control.exit_code == 2 and "control input" in control.output
    absent = run("redact", plan, "--token", "zzzzqqqq", "--with", "qqqqzzzz", "--reason", "r")
    assert absent.exit_code == 2 and "does not occur" in absent.output
    description = run(
        "redact", plan, "--token", "Tiny end-to-end", "--with", "Tidy end-to-end", "--reason", "r"
    )
    assert description.exit_code == 0, description.output  # free text may be redacted
    comment = run("redact", plan, "--token", "first try", "--with", "first TRY", "--reason", "free text only")
    assert comment.exit_code == 0, comment.output
    assert open_sealed_plan(Path(plan)).seal.kind == "redact"
    assert run("verify").exit_code == 0


def test_interrupted_redaction_is_finished_by_rerunning(repo: Path) -> None:
    seal_both()
    rationale = repo / "prereg" / "smoke" / "rationale.md"
    original = rationale.read_bytes()
    args = ("redact", str(rationale), "--token", "wiring test", "--with", "WIRING TEST", "--reason", "r")
    assert run(*args).exit_code == 0
    rationale.write_bytes(original)  # as if the process died after appending, before writing
    broken = run("verify")
    assert broken.exit_code == 3 and "recorded but not applied" in broken.output
    assert run(*args).exit_code == 0
    assert run("verify").exit_code == 0 and b"WIRING TEST" in rationale.read_bytes()

"""`capsule import`: a run chained in another machine's ledger enters ours once; every refusal appends
nothing and prints one `Error:` line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_rewrite import read_entries, write_rechained
from run_pair import as_if_run_for_real, copy_run, dry_run, new_root, sign

from capsule.cli import cli
from capsule.evidence.signing import fingerprint_of, generate_signer
from capsule.hashing import canonical_json, sha256_file
from capsule.prereg.chain import entry_hash
from capsule.prereg.ledger import Ledger, verify_ledger
from capsule.prereg.ledger_entries import SealEntry

LEDGER = Path("prereg") / "ledger.jsonl"


def _local_entry(root: Path, name: str) -> None:
    """Append an entry only this root's ledger has (its own history after the shared seal)."""
    note = root / "prereg" / f"{name}.txt"
    note.write_text(f"{name}\n")
    Ledger.load(root / LEDGER).append(
        SealEntry(path=f"prereg/{name}.txt", sha256=sha256_file(note), note=f"only on {name}")
    )


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Another machine's repository root: the same ledger, one entry of its own, then a signed run
    chained in its ledger. Returns (its ledger, its run)."""
    root = new_root(tmp_path_factory.mktemp("theirs"))
    _local_entry(root, "theirs")
    run = as_if_run_for_real(dry_run(root))
    sign(run, root / LEDGER)
    return root / LEDGER, run


@pytest.fixture
def setup(elsewhere: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """(our root with an entry of its own, the run copied under our results/, their ledger copy)."""
    their_ledger, their_run = elsewhere
    ours = new_root(tmp_path / "ours")
    _local_entry(ours, "ours")
    run = copy_run(their_run, ours / "results" / "smoke")
    shutil.copy(their_ledger, tmp_path / "their-ledger.jsonl")
    return ours, run, tmp_path / "their-ledger.jsonl"


def _invoke(root: Path, *args: str):  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        return CliRunner().invoke(cli, list(args))


def _import(root: Path, run: Path, their_ledger: Path):  # type: ignore[no-untyped-def]
    return _invoke(root, "import", str(run), "--ledger", str(their_ledger))


def _refused(root: Path, result, code: int, text: str) -> None:  # type: ignore[no-untyped-def]
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, result.output + result.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: ") and text in lines[0], result.stderr


def test_import_appends_one_entry_then_verify_accepts_the_run_and_a_second_import_is_a_no_op(
    setup: tuple[Path, Path, Path],
) -> None:
    ours, run, their_ledger = setup
    before = Ledger.load(ours / LEDGER).entries
    assert _invoke(ours, "verify", str(run)).exit_code == 3  # not in our ledger yet
    result = _import(ours, run, their_ledger)
    assert result.exit_code == 0, result.output + result.stderr
    after = Ledger.load(ours / LEDGER).entries
    assert after[: len(before)] == before and len(after) == len(before) + 1
    entry = after[-1]
    bundle = json.loads((run / "bundle.json").read_text())
    foreign = Ledger.load(their_ledger).entries[-1]
    assert entry.kind == "import" and entry.sha256 == sha256_file(run / "bundle.dsse.json")
    assert entry.key_fingerprint == bundle["key"]["fingerprint"] == foreign.key_fingerprint
    assert entry.foreign_entry == foreign.hash and entry.foreign_seq == foreign.seq
    assert entry.path == (run / "bundle.dsse.json").relative_to(ours).as_posix()
    verify_ledger(ours / LEDGER)  # the new kind passes ledger verification
    verified = _invoke(ours, "verify", str(run))
    assert verified.exit_code == 0, verified.output + verified.stderr
    assert f"bundle entry {entry.seq}" in verified.stdout and "imported chain" in verified.stdout
    size = (ours / LEDGER).stat().st_size
    again = _import(ours, run, their_ledger)
    assert again.exit_code == 0 and "nothing appended" in again.stdout
    assert (ours / LEDGER).stat().st_size == size


def _assert_nothing_appended(ours: Path, before: bytes) -> None:
    assert (ours / LEDGER).read_bytes() == before


def test_a_run_of_another_plan_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    plan = run / "plan.toml"
    plan.write_text(plan.read_text() + "# another plan\n")
    bundle = json.loads((run / "bundle.json").read_text())
    bundle["plan"]["sha256"] = sha256_file(plan)
    (run / "bundle.json").write_text(json.dumps(bundle))
    sign(run, None)
    _refused(ours, _import(ours, run, their_ledger), 2, "not sealed in")
    _assert_nothing_appended(ours, before)


def test_an_unsigned_run_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    (run / "bundle.dsse.json").unlink()
    _refused(ours, _import(ours, run, their_ledger), 2, "incomplete")
    _assert_nothing_appended(ours, before)


def test_a_truncated_run_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    rows = next((run / "generations").glob("*.jsonl"))
    lines = rows.read_text().splitlines(keepends=True)
    rows.write_text("".join(lines[:-1]))  # the last row lost in transit
    _refused(ours, _import(ours, run, their_ledger), 3, "in the bundle")
    _assert_nothing_appended(ours, before)


def test_a_failed_signature_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    path = run / "bundle.dsse.json"
    envelope = json.loads(path.read_text())
    signature = envelope["signatures"][0]["sig"]
    envelope["signatures"][0]["sig"] = ("A" if signature[0] != "A" else "B") + signature[1:]
    path.write_text(json.dumps(envelope))
    _refused(ours, _import(ours, run, their_ledger), 3, "signature")
    _assert_nothing_appended(ours, before)


def test_a_foreign_ledger_not_chaining_to_our_seal_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    entries = read_entries(their_ledger)
    entries[0] = {**entries[0], "note": "another history"}
    write_rechained(their_ledger, entries)  # a valid chain that is not ours
    _refused(ours, _import(ours, run, their_ledger), 3, "does not chain to")
    _assert_nothing_appended(ours, before)


def test_a_foreign_ledger_without_the_runs_bundle_entry_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    lines = their_ledger.read_bytes().splitlines(keepends=True)
    their_ledger.write_bytes(b"".join(lines[:-1]))  # its last line (the bundle entry) cut off
    _refused(ours, _import(ours, run, their_ledger), 3, "foreign ledger")
    _assert_nothing_appended(ours, before)


def test_a_foreign_ledger_with_an_edited_entry_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    entries = read_entries(their_ledger)
    entries[-1]["note"] = "edited"
    their_ledger.write_bytes(b"".join(canonical_json(e) + b"\n" for e in entries))
    _refused(ours, _import(ours, run, their_ledger), 3, "hash differs")
    _assert_nothing_appended(ours, before)


def test_an_import_entry_naming_no_plan_record_breaks_the_chain(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    assert _import(ours, run, their_ledger).exit_code == 0
    entries = read_entries(ours / LEDGER)
    entries[-1]["seal"] = entries[-1]["foreign_entry"]  # a hash that is no seal or amend of this ledger
    entries[-1]["hash"] = entry_hash(entries[-1])
    (ours / LEDGER).write_bytes(b"".join(canonical_json(e) + b"\n" for e in entries))
    result = _invoke(ours, "prereg", "verify")
    assert result.exit_code == 3 and "no earlier seal or amend" in result.output + result.stderr


def test_a_run_signed_by_a_key_the_plan_does_not_trust_is_refused(setup: tuple[Path, Path, Path]) -> None:
    ours, run, their_ledger = setup
    before = (ours / LEDGER).read_bytes()
    stranger = generate_signer()
    sign(run, None, key=stranger)  # the same run, re-signed by a key no signers entry names
    result = _import(ours, run, their_ledger)
    _refused(ours, result, 3, fingerprint_of(stranger.public_key))
    assert "capsule prereg signers" in result.stderr
    _assert_nothing_appended(ours, before)

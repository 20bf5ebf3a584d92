"""The hash chain itself: append, verify, refusals; open_sealed_plan in both directions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capsule.errors import BadInputError, VerificationError
from capsule.hashing import canonical_json, sha256_file
from capsule.prereg.chain import GENESIS, entry_hash
from capsule.prereg.ledger import Ledger, verify_ledger
from capsule.prereg.ledger_entries import BundleEntry, SealEntry, entry_record
from capsule.prereg.sealed_plan import open_sealed_plan
from capsule.prereg.sealing import amend_plan, seal_plan


@pytest.fixture
def repo(tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repo root with a copy of the smoke plan and an empty ledger; cwd is the root."""
    shutil.copytree(repo_root / "prereg" / "smoke", tmp_path / "prereg" / "smoke")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ledger_path(repo: Path) -> Path:
    return repo / "prereg" / "ledger.jsonl"


def test_empty_ledger(repo: Path) -> None:
    ledger = Ledger.load(ledger_path(repo))
    ledger.verify()
    assert ledger.head() == GENESIS and ledger.entries == []


def test_append_links_and_hashes(repo: Path) -> None:
    (repo / "a.txt").write_text("alpha")
    (repo / "b.txt").write_text("beta")  # a bundle records another file: a sealed one only by amend
    ledger = Ledger.load(ledger_path(repo))
    first = ledger.append(SealEntry(path="a.txt", sha256=sha256_file(repo / "a.txt"), note="first"))
    second = ledger.append(
        BundleEntry(path="b.txt", sha256=sha256_file(repo / "b.txt"), note="second", run_id="r1")
    )
    assert first.prev == GENESIS and second.prev == first.hash
    assert second.hash == entry_hash(entry_record(second)) and second.seq == 2
    assert first.time.endswith("Z")
    lines = ledger_path(repo).read_bytes().split(b"\n")
    assert lines[0] == canonical_json(entry_record(first)) and lines[2] == b""
    reloaded = Ledger.load(ledger_path(repo))
    reloaded.verify()
    assert reloaded.head() == second.hash and reloaded.latest_for("a.txt") == first


def test_append_refuses_bad_input(repo: Path) -> None:
    ledger = Ledger.load(ledger_path(repo))
    with pytest.raises(BadInputError, match="not a full hex digest"):
        ledger.append(SealEntry(path="a.txt", sha256="abc", note=""))
    with pytest.raises(BadInputError):
        ledger.append(SealEntry(path="../a.txt", sha256="0" * 64, note=""))
    draft = BundleEntry(path="a.txt", sha256="0" * 64, note="", seq=9, prev="1" * 64, hash="x")
    placed = ledger.append(draft)
    assert (placed.seq, placed.prev) == (1, GENESIS)  # a draft's place in the chain is the ledger's to set
    assert placed.hash == entry_hash(entry_record(placed))


def test_append_refuses_a_ledger_changed_underneath(repo: Path) -> None:
    first, second = Ledger.load(ledger_path(repo)), Ledger.load(ledger_path(repo))
    first.append(BundleEntry(path="x.json", sha256="1" * 64, note="one"))
    with pytest.raises(VerificationError, match="changed since it was loaded"):
        second.append(BundleEntry(path="y.json", sha256="2" * 64, note="two"))


def test_file_change_names_its_entry(repo: Path) -> None:
    seal_plan(Path("prereg/smoke"), "seal", ledger_path(repo))
    rationale = repo / "prereg" / "smoke" / "rationale.md"
    rationale.write_text(rationale.read_text() + " ")
    seq = Ledger.load(ledger_path(repo)).latest_for("prereg/smoke/rationale.md").seq
    with pytest.raises(
        VerificationError, match=rf"seq {seq}: seal of prereg/smoke/rationale.md: file sha256"
    ):
        Ledger.load(ledger_path(repo)).verify()


def test_forged_entry_with_valid_hash_is_caught(repo: Path) -> None:
    """A hand-made entry that re-seals a sealed file, with a correct hash and link, still fails."""
    seal_plan(Path("prereg/smoke"), "seal", ledger_path(repo))
    ledger = Ledger.load(ledger_path(repo))
    entry = {
        "seq": len(ledger.entries) + 1,
        "kind": "seal",
        "path": "prereg/smoke/plan.toml",
        "sha256": "3" * 64,
        "prev": ledger.head(),
        "time": "2026-01-01T00:00:00Z",
        "note": "forged",
    }
    entry["hash"] = entry_hash(entry)
    with open(ledger_path(repo), "ab") as handle:
        handle.write(canonical_json(entry) + b"\n")
    with pytest.raises(VerificationError, match=f"seq {entry['seq']}: re-seals"):
        Ledger.load(ledger_path(repo)).verify()


def test_open_sealed_plan_both_directions(repo: Path) -> None:
    plan = Path("prereg/smoke/plan.toml")
    with pytest.raises(VerificationError, match="not sealed"):
        open_sealed_plan(plan, ledger_path(repo))
    seal_plan(plan, "seal", ledger_path(repo))
    record = open_sealed_plan(plan, ledger_path(repo)).seal
    assert record.path == "prereg/smoke/plan.toml" and record.sha256 == sha256_file(plan)
    assert open_sealed_plan(repo / "prereg" / "smoke", ledger_path(repo)).seal == record  # a directory
    plan.write_bytes(plan.read_bytes() + b"# edited after sealing\n")
    with pytest.raises(VerificationError, match="the file changed after it was recorded"):
        open_sealed_plan(plan, ledger_path(repo))


def test_open_sealed_plan_refuses_changed_companion_even_if_unrecorded_elsewhere(repo: Path) -> None:
    plan = Path("prereg/smoke/plan.toml")
    seal_plan(plan, "seal", ledger_path(repo))
    (repo / "prereg" / "smoke" / "rationale.md").unlink()  # the chain re-hashes files that exist
    with pytest.raises(VerificationError, match="companion prereg/smoke/rationale.md"):
        open_sealed_plan(plan, ledger_path(repo))


def test_open_sealed_plan_refuses_a_superseded_plan(repo: Path) -> None:
    old = Path("prereg/smoke/plan.toml")
    seal_plan(old, "seal", ledger_path(repo))
    new = repo / "prereg" / "smoke2"
    shutil.copytree(repo / "prereg" / "smoke", new)
    text = (
        (new / "plan.toml")
        .read_text()
        .replace(
            'name = "smoke"', 'name = "smoke2"\namends = "prereg/smoke/plan.toml"\namend_reason = "typo"', 1
        )
    )
    (new / "plan.toml").write_text(text)
    amend_plan(new / "plan.toml", old, "typo", ledger_path(repo))
    with pytest.raises(VerificationError, match="superseded by prereg/smoke2/plan.toml"):
        open_sealed_plan(old, ledger_path(repo))
    assert open_sealed_plan(new, ledger_path(repo)).seal.kind == "amend"
    verify_ledger(ledger_path(repo))


def test_coverage_catches_an_unsealed_plan(repo: Path) -> None:
    ledger_path(repo).write_bytes(b"")  # an empty ledger (a missing one is an error of its own)
    Ledger.load(ledger_path(repo)).verify()  # the chain alone is fine (empty)
    with pytest.raises(VerificationError, match="seq 1: missing: prereg/smoke/plan.toml has no seal entry"):
        verify_ledger(ledger_path(repo))


def test_guards_survive_python_O(repo: Path) -> None:
    """Checks are code paths, not asserts: tampering is still refused under `python -O`."""
    seal_plan(Path("prereg/smoke"), "seal", ledger_path(repo))
    plan = repo / "prereg" / "smoke" / "plan.toml"
    plan.write_bytes(plan.read_bytes() + b"\n")
    script = (
        "import sys; from pathlib import Path; from capsule.prereg.sealed_plan import open_sealed_plan\n"
        "from capsule.errors import VerificationError\n"
        "try:\n    open_sealed_plan(Path('prereg/smoke')).seal\nexcept VerificationError as e:\n"
        "    print('refused', e); sys.exit(3)\n"
    )
    result = subprocess.run([sys.executable, "-O", "-c", script], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 3 and "refused" in result.stdout


def test_no_assert_in_guard_modules(repo_root: Path) -> None:
    for module in ("ledger.py", "sealing.py", "loader.py", "checks.py"):
        source = (repo_root / "capsule" / "prereg" / module).read_text()
        assert "\n    assert " not in source and "\nassert " not in source, module


def test_entries_are_json_objects_with_all_fields(repo: Path) -> None:
    seal_plan(Path("prereg/smoke"), "seal", ledger_path(repo))
    for line in ledger_path(repo).read_text().splitlines():
        entry = json.loads(line)
        assert {"seq", "kind", "path", "sha256", "prev", "time", "note", "hash"} <= set(entry)

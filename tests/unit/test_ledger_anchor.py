"""The anchored ledger: `capsule prereg verify` checks every entry of the ledger at a git revision
(default HEAD) or up to a published head hash is still in place, byte for byte. The real repository's
check runs here (what CI runs), then rewritten, reordered and truncated histories in a temp git repo."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ledger_rewrite import commit_all, read_entries, write_rechained

from capsule.cli import cli
from capsule.prereg.ledger import Ledger
from capsule.prereg.sealing import seal_plan
from capsule.prereg.signers import add_signers

REPO = Path(__file__).resolve().parents[2]
KEY = "ab" * 32  # a fingerprint (no key needed: signers entries record fingerprints only)


def verify(*args: str) -> Result:
    return CliRunner().invoke(cli, ["prereg", "verify", *args])


def test_real_repository_ledger_verifies_against_its_last_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed ledger of this checkout, against HEAD: what CI runs (`make test`)."""
    monkeypatch.chdir(REPO)
    result = verify()
    assert result.exit_code == 0, result.output + result.stderr
    if shutil.which("git") and (REPO / ".git").exists():
        assert "anchored at git HEAD (commit " in result.output
    else:  # a tree without its git history (an exported tarball): said plainly, never silently
        assert "not anchored:" in result.output


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp git repository: the smoke plan sealed, a signers entry, committed; cwd is its root."""
    shutil.copytree(REPO / "prereg" / "smoke", tmp_path / "prereg" / "smoke")
    monkeypatch.chdir(tmp_path)
    ledger = Path("prereg/ledger.jsonl")
    seal_plan(Path("prereg/smoke"), "seal smoke", ledger)
    add_signers(Path("prereg/smoke"), [KEY], "the test key", ledger)
    commit_all(tmp_path, "sealed")
    return tmp_path


def ledger_file(repo: Path) -> Path:
    return repo / "prereg" / "ledger.jsonl"


def test_committed_ledger_verifies_and_may_grow(repo: Path) -> None:
    assert "anchored at git HEAD" in verify().output and verify().exit_code == 0
    add_signers(Path("prereg/smoke"), ["cd" * 32], "another key, after the commit", ledger_file(repo))
    result = verify()
    assert result.exit_code == 0, result.output
    assert "its 4 entries unchanged" in result.output and "OK: 5 entries" in result.output


def test_rewritten_history_fails_naming_the_first_changed_entry(repo: Path) -> None:
    entries = read_entries(ledger_file(repo))
    entries[1]["note"] = "a quietly better note"
    write_rechained(ledger_file(repo), entries)
    Ledger.load(ledger_file(repo)).verify()  # the rewritten chain is a valid chain on its own
    result = verify()
    assert result.exit_code == 3
    assert "seq 2: differs from the ledger at git HEAD (commit " in result.stderr


def test_reordered_history_fails(repo: Path) -> None:
    entries = read_entries(ledger_file(repo))
    entries[0], entries[1] = entries[1], entries[0]  # the two companions' seals swapped, chain rebuilt
    write_rechained(ledger_file(repo), entries)
    Ledger.load(ledger_file(repo)).verify()
    result = verify()
    assert result.exit_code == 3 and "seq 1: differs from the ledger at git HEAD" in result.stderr


def test_truncated_history_fails(repo: Path) -> None:
    """Deleting the last entry (a signers entry) leaves a valid chain and every plan sealed: only the
    anchor shows it."""
    data = ledger_file(repo).read_bytes()
    ledger_file(repo).write_bytes(b"".join(line + b"\n" for line in data.split(b"\n")[:-2]))
    result = verify()
    assert result.exit_code == 3
    assert "seq 4: in the ledger at git HEAD" in result.stderr and "truncated to 3 entries" in result.stderr


def test_an_older_revision_and_a_head_hash_anchor(repo: Path) -> None:
    first_head = Ledger.load(ledger_file(repo)).entries[1].hash
    add_signers(Path("prereg/smoke"), ["cd" * 32], "a second key", ledger_file(repo))
    commit_all(repo, "second key")
    assert verify("--anchor", "HEAD~1").exit_code == 0
    by_hash = verify("--anchor", first_head)
    assert by_hash.exit_code == 0 and f"anchored at head hash {first_head[:16]}" in by_hash.output
    entries = read_entries(ledger_file(repo))
    entries[0]["note"] = "rewritten"
    write_rechained(ledger_file(repo), entries)
    assert "seq 1: differs from the ledger at git HEAD~1" in verify("--anchor", "HEAD~1").stderr
    gone = verify("--anchor", first_head)
    assert gone.exit_code == 3 and f"no entry has the anchor head hash {first_head}" in gone.stderr


def test_an_anchor_that_names_nothing_is_bad_input(repo: Path) -> None:
    result = verify("--anchor", "no-such-branch")
    assert result.exit_code == 2 and "names no commit" in result.stderr
    assert verify("--anchor", "--help").exit_code != 0


def test_outside_a_checkout_the_output_says_it_is_not_anchored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(REPO / "prereg" / "smoke", tmp_path / "prereg" / "smoke")
    monkeypatch.chdir(tmp_path)
    seal_plan(Path("prereg/smoke"), "seal smoke", Path("prereg/ledger.jsonl"))
    result = verify()
    assert result.exit_code == 0 and "not anchored:" in result.output
    head = Ledger.load(Path("prereg/ledger.jsonl")).head()
    assert verify("--anchor", head).exit_code == 0
    missing = verify("--anchor", "9" * 64)
    assert missing.exit_code == 3 and "no entry has the anchor head hash" in missing.stderr
    assert verify("--anchor", "HEAD").exit_code == 2

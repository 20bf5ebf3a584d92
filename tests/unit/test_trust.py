"""The trust root: a plan's `[evidence] signers`, `capsule prereg signers` entries, and `capsule verify`
refusing a run signed by any other key unless the user pins one (saying which key and why)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_bundle import PLAN_PATH, build_study

from capsule.cli import cli
from capsule.errors import BadInputError, VerificationError
from capsule.evidence.trust import check_signer, trusted_signers
from capsule.prereg.ledger import Ledger
from capsule.prereg.loader import load_plan, parse_plan
from capsule.prereg.sealing import seal_plan
from capsule.run_dir import PUBLIC_KEY

REPO = Path(__file__).resolve().parents[2]
SMOKE = (REPO / "prereg/smoke/plan.toml").read_text()
KEY_A, KEY_B = "ab" * 32, "cd" * 32


def with_evidence(table: str) -> str:
    return SMOKE + "\n[evidence]\n" + table + "\n"


def test_plan_signers_load_and_are_optional() -> None:
    assert load_plan(REPO / "prereg/smoke").signers == ()  # a plan sealed before the field still loads
    plan = parse_plan(with_evidence(f'signers = ["{KEY_A}", "{KEY_B}"]'), REPO / "prereg/smoke/plan.toml")
    assert plan.signers == (KEY_A, KEY_B)


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('signers = ["abc"]', "is not a key fingerprint"),
        (f'signers = ["{KEY_A.upper()}"]', "is not a key fingerprint"),
        (f'signers = ["{KEY_A}", "{KEY_A}"]', "listed twice"),
        ("signers = 3", "must be a list of strings"),
        (f'signers = ["{KEY_A}"]\nkeys = []', "unknown key 'keys'"),
        ("", "missing required key 'signers'"),
    ],
)
def test_bad_plan_signers_are_refused(table: str, words: str) -> None:
    with pytest.raises(BadInputError, match=words):
        parse_plan(with_evidence(table), Path("p/plan.toml"))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repo root with the smoke plan sealed; cwd is the root."""
    shutil.copytree(REPO / "prereg/smoke", tmp_path / "prereg/smoke")
    monkeypatch.chdir(tmp_path)
    seal_plan(Path("prereg/smoke"), "seal smoke", Path("prereg/ledger.jsonl"))
    return tmp_path


def signers(*args: str) -> Result:
    return CliRunner().invoke(cli, ["prereg", "signers", *args])


def test_signers_command_appends_one_sealed_entry(repo: Path) -> None:
    result = signers("prereg/smoke", "--add", KEY_A, "--add", KEY_B, "--reason", "the lab's two keys")
    assert result.exit_code == 0, result.output
    ledger = Ledger.load(Path("prereg/ledger.jsonl"))
    entry = ledger.entries[-1]
    assert entry.kind == "signers" and entry.path == "prereg/smoke/plan.toml"
    assert entry.fingerprints == [KEY_A, KEY_B] and entry.note == "the lab's two keys"
    assert entry.sha256 == ledger.latest_for("prereg/smoke/plan.toml").sha256  # type: ignore[union-attr]
    grants = trusted_signers(ledger, "prereg/smoke/plan.toml")
    assert set(grants) == {KEY_A, KEY_B} and grants[KEY_A].seq == entry.seq
    again = signers("prereg/smoke", "--add", KEY_A, "--reason", "again")
    assert again.exit_code == 0 and "already trusted" in again.output
    assert len(Ledger.load(Path("prereg/ledger.jsonl")).entries) == len(ledger.entries)
    listed = CliRunner().invoke(cli, ["prereg", "verify"])
    assert listed.exit_code == 0 and "signers  prereg/smoke/plan.toml" in listed.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("prereg/smoke", "--add", "xyz", "--reason", "r"), "not a key fingerprint"),
        (("prereg/smoke", "--add", KEY_A, "--reason", " "), "--reason must say why"),
        (("prereg/none", "--add", KEY_A, "--reason", "r"), "not a sealed plan"),
        (("prereg/smoke/rationale.md", "--add", KEY_A, "--reason", "r"), "not a sealed plan"),
    ],
)
def test_signers_command_refusals(repo: Path, args: tuple[str, ...], words: str) -> None:
    before = (repo / "prereg/ledger.jsonl").read_bytes()
    result = signers(*args)
    assert result.exit_code == 2 and words in result.stderr, result.output
    assert (repo / "prereg/ledger.jsonl").read_bytes() == before


def test_a_changed_plan_gets_no_signers(repo: Path) -> None:
    plan = repo / "prereg/smoke/plan.toml"
    plan.write_text(plan.read_text() + "\n")
    result = signers("prereg/smoke", "--add", KEY_A, "--reason", "r")
    assert result.exit_code == 3 and "seq 3: seal of prereg/smoke/plan.toml: file sha256" in result.stderr


def test_the_plans_own_list_and_entries_combine(repo: Path) -> None:
    """Plan-listed keys are trusted with no entry; later entries add keys; an unlisted key is refused."""
    ledger = Ledger.load(Path("prereg/ledger.jsonl"))
    plan_bytes = with_evidence(f'signers = ["{KEY_A}"]').encode()
    grants = trusted_signers(ledger, "prereg/smoke/plan.toml", plan_bytes)
    assert list(grants) == [KEY_A] and grants[KEY_A].seq is None
    assert "[evidence] signers" in grants[KEY_A].why
    verdict = check_signer(ledger, "prereg/smoke/plan.toml", KEY_A, plan_bytes=plan_bytes)
    assert verdict.grant is not None and "listed in prereg/smoke/plan.toml" in verdict.why
    with pytest.raises(VerificationError, match=f"signed by key {KEY_B}, which is not trusted"):
        check_signer(ledger, "prereg/smoke/plan.toml", KEY_B, plan_bytes=plan_bytes)
    pinned = check_signer(
        ledger, "prereg/smoke/plan.toml", KEY_B, plan_bytes=plan_bytes, pinned=Path("k.pem")
    )
    assert pinned.grant is None and "NOT trusted" in pinned.why


def test_the_checkout_plan_must_be_a_recorded_version(repo: Path) -> None:
    ledger = Ledger.load(Path("prereg/ledger.jsonl"))
    assert trusted_signers(ledger, "prereg/smoke/plan.toml") == {}
    (repo / "prereg/smoke/plan.toml").write_text(with_evidence(f'signers = ["{KEY_A}"]'))  # an edit
    with pytest.raises(VerificationError, match="none of the versions"):
        trusted_signers(ledger, "prereg/smoke/plan.toml")


def run_verify(study_dir: Path, ledger: Path, *extra: str) -> Result:
    return CliRunner().invoke(cli, ["verify", str(study_dir), "--ledger", str(ledger), *extra])


def test_verify_refuses_an_untrusted_key_naming_it(tmp_path: Path) -> None:
    study = build_study(tmp_path, trusted=False)
    result = run_verify(study.run_dir, study.ledger_path)
    assert result.exit_code == 3
    line = result.stderr.strip()
    assert line.startswith(f"Error: run run-1: signed by key {study.result.fingerprint}, which is not")
    assert f"for plan {PLAN_PATH}" in line and "--key" in line and "capsule prereg signers" in line


def test_verify_accepts_a_pinned_key_and_says_it_is_not_trusted(tmp_path: Path) -> None:
    study = build_study(tmp_path, trusted=False)
    result = run_verify(study.run_dir, study.ledger_path, "--key", str(study.run_dir / PUBLIC_KEY))
    assert result.exit_code == 0, result.output
    assert f"pinned with --key {study.run_dir / PUBLIC_KEY}; NOT trusted by plan {PLAN_PATH}" in result.output


def test_verify_says_why_a_key_is_trusted(tmp_path: Path) -> None:
    study = build_study(tmp_path)
    result = run_verify(study.run_dir, study.ledger_path)
    assert result.exit_code == 0, result.output
    assert study.result.fingerprint in result.output
    assert f"trusted for {PLAN_PATH}: added by signers entry 3" in result.output
    assert "after the run's bundle entry" not in result.output  # it was trusted before the run

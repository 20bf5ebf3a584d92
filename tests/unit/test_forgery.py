"""The forgeries of issue 18, performed on a temporary git repository holding a copy of this checkout's
prereg/ and results/ (committed: the anchor), each asserted refused:

(a) a response and its score changed in the reference run, the run signed again with a new key through
    the library's own bundle code, the ledger's bundle entry rewritten to match (chain recomputed):
    `capsule verify` refuses the untrusted key by name, `capsule prereg verify` fails against the
    anchor; the same forgery appended as a new bundle entry instead (the anchor holds) is still
    refused by the trust check;
(b) a rewritten ledger (an anchored entry edited, the chain recomputed) and a truncated one;
(c) the reference run's bundle copied onto another run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ledger_rewrite import commit_all, read_entries, write_rechained
from reference_runs import V2_RUN

from capsule.cli import cli
from capsule.evidence.signing import generate_signer
from capsule.pipeline.resign import sign_again
from capsule.prereg.ledger import Ledger
from capsule.prereg.signers import add_signers
from capsule.run_dir import BUNDLE, ENVELOPE, PUBLIC_KEY

REPO = Path(__file__).resolve().parents[2]
RUN = V2_RUN.relative_to(REPO).as_posix()
ARM = "primary"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp git repository with prereg/ and results/ copied and committed; cwd is its root."""
    root = tmp_path / "repo"
    for part in ("prereg", "results"):
        shutil.copytree(REPO / part, root / part)
    commit_all(root, "the published state")
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
    assert invoke("verify", RUN).exit_code == 0, invoke("verify", RUN).output
    assert invoke("prereg", "verify").exit_code == 0
    return root


def change_a_response_and_its_score(run: Path) -> int:
    """Flip the first failed prompt of the primary arm to a pass, in its generation and its score."""
    scores = run / "scores" / f"{ARM}.jsonl"
    rows = [json.loads(line) for line in scores.read_text(encoding="utf-8").split("\n") if line]
    target = next(row for row in rows if not row["strict"]["prompt"])
    for reading in ("strict", "loose"):
        target[reading] = {"instructions": [True] * len(target["instruction_id_list"]), "prompt": True}
    scores.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    generations = run / "generations" / f"{ARM}.jsonl"
    lines = generations.read_text(encoding="utf-8").split("\n")
    for index, line in enumerate(lines):
        if line and json.loads(line)["key"] == target["key"]:
            row = json.loads(line)
            row["response"] = row["raw"] = "A forged, perfectly compliant answer."
            lines[index] = json.dumps(row)
    generations.write_text("\n".join(lines), encoding="utf-8")
    return int(target["key"])


def test_a_forged_run_with_a_rewritten_bundle_entry_is_refused(repo: Path) -> None:
    """The forger replaces the run's bundle entry in place: the ledger is cut back to the entry before
    it, the changed run is signed with a new key through the library (which appends a fresh bundle
    entry), and the entries that followed are put back, the chain recomputed throughout."""
    run, ledger = repo / RUN, repo / "prereg" / "ledger.jsonl"
    change_a_response_and_its_score(run)
    entries = read_entries(ledger)
    last_bundle = max(i for i, e in enumerate(entries) if e["kind"] == "bundle" and e["run_id"] == run.name)
    write_rechained(ledger, entries[:last_bundle])
    result = sign_again(run, key=generate_signer(), ledger=Ledger.load(ledger))
    write_rechained(ledger, read_entries(ledger) + entries[last_bundle + 1 :])
    Ledger.load(ledger).verify()  # the forged chain is internally valid: the chain alone is fooled
    verified = invoke("verify", RUN)
    assert verified.exit_code == 3, verified.output
    assert (
        f"signed by key {result.fingerprint}, which is not trusted for plan prereg/smollm2-135m-v2"
        in verified.stderr
    )
    chain = invoke("prereg", "verify")
    assert chain.exit_code == 3
    assert f"seq {last_bundle + 1}: differs from the ledger at git HEAD" in chain.stderr


def test_a_forged_run_appended_as_a_new_bundle_entry_is_refused(repo: Path) -> None:
    """The forger leaves history alone and appends, as `report --resign` would: the anchor holds (the
    ledger only grew), and the signature is by a key the plan does not trust."""
    run = repo / RUN
    change_a_response_and_its_score(run)
    key = generate_signer()
    sign_again(run, key=key, ledger=Ledger.load(repo / "prereg" / "ledger.jsonl"))
    assert invoke("prereg", "verify").exit_code == 0
    verified = invoke("verify", RUN)
    assert verified.exit_code == 3 and "which is not trusted for plan" in verified.stderr


def test_a_rewritten_ledger_fails_against_the_anchor(repo: Path) -> None:
    ledger = repo / "prereg" / "ledger.jsonl"
    entries = read_entries(ledger)
    amend = next(i for i, e in enumerate(entries) if e["kind"] == "amend")
    entries[amend]["note"] = entries[amend]["note"].replace("45 minutes", "30 minutes")
    write_rechained(ledger, entries)
    Ledger.load(ledger).verify()
    result = invoke("prereg", "verify")
    assert result.exit_code == 3 and f"seq {amend + 1}: differs from the ledger at git HEAD" in result.stderr


def test_a_truncated_ledger_fails_against_the_anchor(repo: Path) -> None:
    """A committed trailing entry deleted (here a signers entry, which no other check misses)."""
    ledger = repo / "prereg" / "ledger.jsonl"
    add_signers(Path("prereg/smoke"), ["ef" * 32], "a key to lose", ledger)
    commit_all(repo, "one more key")
    lines = ledger.read_bytes().split(b"\n")[:-1]
    ledger.write_bytes(b"".join(line + b"\n" for line in lines[:-1]))
    Ledger.load(ledger).verify()
    result = invoke("prereg", "verify")
    assert result.exit_code == 3 and f"seq {len(lines)}: in the ledger at git HEAD (commit " in result.stderr
    assert "missing now (the ledger was truncated" in result.stderr


def test_a_bundle_copied_onto_another_run_is_refused(repo: Path) -> None:
    """Another run (the reference run's files with one answer and score changed, under another id)
    given the reference run's bundle: the signature verifies, but the files are not what it signed."""
    other = repo / "results" / "smollm2-135m" / "20261201T000000Z-00000000"
    shutil.copytree(repo / RUN, other)
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):
        (other / name).unlink()
    change_a_response_and_its_score(other)
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):
        shutil.copy(repo / RUN / name, other / name)
    result = invoke("verify", str(other.relative_to(repo)))
    assert result.exit_code == 3
    assert f"Error: generations/{ARM}.jsonl: " in result.stderr and "in the bundle" in result.stderr

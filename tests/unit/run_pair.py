"""Signed runs of the smoke plan made with the fake backend, for `compare` and `import` tests.

`dry_run(root)` walks `capsule reproduce --dry-run` in a repository root (a copy of prereg/) and
returns the run directory; `sign(run, ledger)` signs it again, appending a `bundle` entry when a
ledger is given (what a real run does), so it verifies as a local run of that ledger; `edit_row`
changes one generation row and its score, then re-signs, as a run from another machine would differ.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from run_start import record_start

from capsule.cli import cli
from capsule.evidence.signing import SigningKey, fingerprint_of, generate_signer
from capsule.hashing import sha256_file, sha256_json
from capsule.pipeline.resign import sign_again
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import SignersEntry
from capsule.prereg.plan_tables import plan_arm_backends

REPO = Path(__file__).resolve().parents[2]
PLAN = "prereg/smoke-v2"


SIGNER = generate_signer()  # the test collaborator's key: trusted for the smoke plan in every new_root


def new_root(path: Path) -> Path:
    """A repository root holding a copy of this repository's prereg/ (plans and ledger), whose ledger
    trusts SIGNER for the smoke plan (a `signers` entry, as a real collaborator's key is added)."""
    shutil.copytree(REPO / "prereg", path / "prereg")
    shutil.copytree(REPO / "results", path / "results")  # the ledger's bundled runs must be present
    ledger = Ledger.load(path / "prereg" / "ledger.jsonl")
    plan = f"{PLAN}/plan.toml"
    ledger.append(SignersEntry(
        path=plan, sha256=sha256_file(path / plan), note="the test collaborator's key",
        fingerprints=[fingerprint_of(SIGNER.public_key)],
    ))
    return path


def dry_run(root: Path) -> Path:
    """One dry run of the smoke plan under `root` (the working directory meanwhile)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setenv("XDG_CONFIG_HOME", str(root / "config"))
        patch.delenv("CAPSULE_SIGNING_KEY", raising=False)
        result = CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", PLAN, "--dry-run"])
    assert result.exit_code == 0, result.output + result.stderr
    (run,) = (root / "runs" / "dry-run" / "smoke").iterdir()
    return run


def as_if_run_for_real(run: Path) -> Path:
    """Turn a dry run into the stand-in for a run made for real on another machine (the unit tier
    runs no model): each arm's sidecar says the backend its plan declares instead of the fake one.
    The caller signs it again. Without this, `capsule import` refuses it as a dry run."""
    declared = plan_arm_backends((run / "plan.toml").read_bytes(), run / "plan.toml")
    for meta_path in sorted((run / "generations").glob("*.meta.json")):
        meta = json.loads(meta_path.read_text())
        backend = declared[meta["arm"]["name"]]
        meta["arm"]["backend"] = meta["backend"]["backend"] = backend
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return run


def set_manifest(run: Path, manifest: dict[str, Any]) -> None:
    """Give `run` another manifest as the run would have recorded it (bundle.json's manifest_digest
    with it, and each arm's sidecar and segment, which `capsule verify` checks); the caller signs it
    again."""
    digest = sha256_json(manifest)
    (run / "manifest.json").write_text(json.dumps(manifest))
    bundle = json.loads((run / "bundle.json").read_text())
    bundle["manifest_digest"] = digest
    (run / "bundle.json").write_text(json.dumps(bundle))
    for meta_path in sorted((run / "generations").glob("*.meta.json")):
        meta = json.loads(meta_path.read_text())
        meta["manifest_digest"] = digest
        for segment in meta["segments"]:
            segment["manifest_digest"] = digest
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")


def sign(run: Path, ledger_path: Path | None, key: SigningKey | None = None) -> None:
    """Sign `run` anew with `key` (default SIGNER); with a ledger, record it there as a run of that
    ledger: its `start` entry (`record_start`) and its bundle entry."""
    if ledger_path is not None:
        record_start(run, ledger_path)
    sign_again(run, key=key or SIGNER, ledger=Ledger.load(ledger_path) if ledger_path else None)


def edit_row(run: Path, arm: str, index: int = 0) -> int:
    """Change row `index` of `arm`'s generations (its text from the 5th character) and flip its
    strict prompt-level verdict, then re-sign without a ledger; returns the row's key."""
    generations = run / "generations" / f"{arm}.jsonl"
    rows = [json.loads(line) for line in generations.read_text().splitlines()]
    row = rows[index]
    row["raw"] = row["response"] = row["raw"][:4] + "edited elsewhere"
    generations.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scores = run / "scores" / f"{arm}.jsonl"
    score_rows = [json.loads(line) for line in scores.read_text().splitlines()]
    for score in score_rows:
        if score["key"] == row["key"]:
            flipped = not score["strict"]["prompt"]
            flags = [flipped] * len(score["instruction_id_list"])
            score["strict"] = {"prompt": flipped, "instructions": flags}
    scores.write_text("".join(json.dumps(r) + "\n" for r in score_rows))
    sign(run, None)
    return int(row["key"])


def copy_run(run: Path, into: Path) -> Path:
    """A copy of `run` at `into`/<run id> (file bytes kept)."""
    target = into / run.name
    shutil.copytree(run, target)
    os.utime(target)
    return target

"""A test run recorded as a real one: `record_start` gives a run made by the test helpers (a dry run
signed again) the `start` entry a recorded run gets when `capsule reproduce` opens it."""

from __future__ import annotations

import json
from pathlib import Path

from capsule.prereg.ledger import Ledger


def record_start(run: Path, ledger_path: Path) -> None:
    """Append `run`'s `start` entry (`Ledger.record_start`) and make its start head (run.json and
    bundle.json) name it, unless the ledger has one already; the caller signs the run again."""
    ledger = Ledger.load(ledger_path)
    bundle = json.loads((run / "bundle.json").read_text())
    if ledger.start_entry(bundle["run_id"]) is not None:
        return
    head = ledger.record_start(bundle["plan"]["path"], bundle["plan"]["sha256"], bundle["run_id"])
    bundle["ledger_heads"]["at_start"] = head
    (run / "bundle.json").write_text(json.dumps(bundle))
    record = json.loads((run / "run.json").read_text())
    record["ledger_head_at_start"] = head
    (run / "run.json").write_text(json.dumps(record))

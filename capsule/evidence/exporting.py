"""`capsule export`: a run made here, and the ledger entries that prove it, packed into one file.

The receiver takes it in with one command, `capsule import FILE` (`capsule.evidence.pack_import`),
instead of copying a run directory and the whole ledger. Checks, nothing written unless all pass:
the run is finished and no dry run (BadInputError, exit 2); its signature and every file verify
(VerificationError, exit 3); the ledger verifies and records the run by a `bundle` entry of this
envelope (exit 2 otherwise; a run imported here is refused too: its proof is another machine's
chain, which this ledger holds only as one `import` entry, so only runs made here are exported);
`--out` does not exist (a pack is never overwritten). The pack's layout is `capsule.evidence.run_pack`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from capsule.atomic import make_directory
from capsule.errors import BadInputError, VerificationError
from capsule.evidence.bundle import BUNDLE_OUTPUTS, list_run_files
from capsule.evidence.importing import load_verified, verified_run
from capsule.evidence.run_pack import write_pack
from capsule.prereg.ledger_entries import ImportEntry, entry_bytes


@dataclass(frozen=True)
class ExportResult:
    """What `export_run` wrote: the pack, its run, how many files, and the entries it carries."""

    out: Path
    run_id: str
    n_files: int
    size: int
    first_seq: int
    last_seq: int

    def lines(self) -> list[str]:
        """What the command prints: the file written, then the one command the receiver runs."""
        return [
            f"wrote {self.out} ({self.size} bytes): run {self.run_id}, {self.n_files} files, ledger "
            f"entries {self.first_seq}..{self.last_seq} (its plan's record to its bundle entry)",
            f"send it; the receiver runs, in their repository's root: capsule import {self.out.name}",
        ]


def _refuse_existing(out: Path, run_dir: Path) -> None:
    if os.path.lexists(out):
        raise BadInputError(f"{out}: exists; a pack is never overwritten: give a new --out path")
    if Path(os.path.abspath(out)).is_relative_to(os.path.abspath(run_dir)):
        raise BadInputError(f"{out}: inside the run directory {run_dir}; write the pack elsewhere")


def export_run(run_dir: Path, *, out: Path, ledger_path: Path) -> ExportResult:
    """Pack the finished, signed run `run_dir` and the entries of `ledger_path` from its plan's
    record to its bundle entry into the new file `out`; see the module doc."""
    _refuse_existing(out, run_dir)
    run = verified_run(run_dir)
    run_id, plan = run.summary.run_id, run.bundle.plan
    ledger = load_verified(ledger_path, "ledger", files=True,
                           remedy="pass --ledger with the ledger the run was signed in")
    bundled = ledger.bundle_entries(run_id, run.envelope_sha256)
    if not bundled:
        imported = [e for e in ledger.run_entries(run_id) if isinstance(e, ImportEntry)]
        if imported:
            raise BadInputError(
                f"run {run_id} was imported here (import entry {imported[-1].seq}), not made here: only "
                "runs made here are exported; the machine that made it can export it"
            )
        raise BadInputError(
            f"run {run_id}: {ledger.path} records it by no bundle entry of this envelope; export a run "
            "with the ledger it was signed in (--ledger)"
        )
    last = bundled[-1]
    records = [
        e for e in ledger.plan_records(plan.path) if e.sha256 == plan.sha256 and e.seq < last.seq
    ]
    if not records:
        raise VerificationError(
            f"{ledger.path}: no seal or amend of the run's plan {plan.path} (sha256 "
            f"{plan.sha256[:16]}) before its bundle entry {last.seq}"
        )
    first = records[-1]
    lines = b"".join(entry_bytes(e) + b"\n" for e in ledger.entries[first.seq - 1 : last.seq])
    files = list_run_files(run_dir) + sorted(BUNDLE_OUTPUTS)
    make_directory(out.parent, "pack's directory")
    size = write_pack(out, run_dir, files, run_id=run_id, plan_path=plan.path, ledger_lines=lines,
                      first_seq=first.seq, last_seq=last.seq)
    return ExportResult(out, run_id, len(files), size, first.seq, last.seq)

"""`capsule import FILE`: a run pack (`capsule.evidence.run_pack`, made by `capsule export`) enters
this repository: its run lands in results/<plan name>/<run_id>/ and one `import` entry is appended.

Order, nothing written to the repository and nothing appended unless every check passes:

1. the pack's headers, `pack.json` and `ledger.jsonl` are read and checked (`read_pack`, exit 2),
   and this ledger verifies;
2. the run's own plan copy names where it goes: results/<plan name>/<run_id>/ under this ledger's
   root (the plan's `name`, as `capsule reproduce` names results/<plan>/);
3. the run is extracted into a temporary directory inside results/<plan name>/ and checked as every
   import is (`capsule.evidence.importing`: `verified_run`, then `check_import`), `pack.json`
   agreeing with it (run id, plan path). Its foreign ledger is this ledger's entries before its
   record of the run's plan followed by the packed entries, whose first must be that record, byte
   for byte (exit 3 otherwise, and when the chain does not link);
4. the run moves to results/<plan name>/<run_id>/ (refused if anything is there) and the import
   entry is appended; if the append fails, the run is removed again.

A run this ledger already records with the pack's envelope is "already recorded": nothing written,
nothing appended. The temporary directory, and any results/ directory made for it, is removed
whatever happens (a process killed meanwhile leaves a `.import-*` directory to delete by hand).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from capsule.atomic import check_output_dir
from capsule.errors import BadInputError, CapsuleError, VerificationError
from capsule.evidence.importing import (
    ForeignChain,
    ImportResult,
    PendingImport,
    VerifiedRun,
    check_import,
    import_run,
    load_verified,
    verified_run,
)
from capsule.evidence.pack_reader import Pack, extract_run, read_pack
from capsule.evidence.run_pack import PACK_LEDGER, PACK_RECORD
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import entry_bytes
from capsule.prereg.tables import Section, parse_toml
from capsule.run_dir import PLAN_COPY, RESULTS_ROOT, RunDir


def _plan_name(pack: Pack) -> str:
    """The name of the run's plan, from its own plan.toml copy (what results/<plan>/ is named by),
    read by the loader's parser and its one rule for names; only that key (the copy's companions are
    not in the run, and its bytes are checked against the run's signed bundle later)."""
    where = f"{pack.path}: {pack.run_id}/{PLAN_COPY}"
    try:
        text = pack.plan_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{where}: not UTF-8 text") from None
    return Section(where, "top level", parse_toml(text, where)).file_name()


def _make_directories(results: Path, directory: Path) -> list[Path]:
    """Make `results` and `directory` in it where missing (neither a symbolic link); those made,
    outermost first."""
    made: list[Path] = []
    for path in (results, directory):
        check_output_dir(path, "results directory")
        if not path.exists():
            path.mkdir()
            made.append(path)
    return made


def _foreign(pack: Pack, ours: Ledger, seal_index: int, staging: Path) -> ForeignChain:
    """The other machine's ledger as the pack carries it: our entries before our record of the
    plan, then the packed entries, whose first must be that record byte for byte."""
    label = f"its {PACK_LEDGER}"
    if pack.first_seq != seal_index + 1:
        raise VerificationError(
            f"its {PACK_LEDGER} starts at entry {pack.first_seq}, but this ledger records the "
            f"run's plan at entry {seal_index + 1}: it does not chain to this repository's ledger"
        )
    mine = entry_bytes(ours.entries[seal_index]) + b"\n"
    if not pack.ledger_lines.startswith(mine):
        raise VerificationError(
            f"its {PACK_LEDGER}'s first entry ({pack.first_seq}) is not this ledger's record of the "
            f"run's plan (hash {ours.entries[seal_index].hash[:16]}) byte for byte: it does not chain "
            "to this repository's ledger"
        )
    chain = staging / PACK_LEDGER
    chain.write_bytes(b"".join(entry_bytes(e) + b"\n" for e in ours.entries[:seal_index]) + pack.ledger_lines)
    try:
        theirs = Ledger.load(chain)  # every entry's fields, hash and link, as any foreign ledger
    except VerificationError as error:
        raise VerificationError(str(error).replace(str(chain), PACK_LEDGER)) from None
    return ForeignChain(theirs, label, Path(PACK_LEDGER))


def _check_agrees(pack: Pack, run: VerifiedRun) -> None:
    """pack.json must name the run its directory holds (its run id and plan path)."""
    plan = run.bundle.plan.path
    if run.summary.run_id != pack.run_id or plan != pack.plan_path:
        raise BadInputError(
            f"{PACK_RECORD} names run {pack.run_id} of {pack.plan_path}, its run directory "
            f"holds run {run.summary.run_id} of {plan}"
        )
    if RunDir(run.run_dir).plan.read_bytes() != pack.plan_bytes:
        raise BadInputError("it changed while it was read")


def _place(run_dir: Path, destination: Path) -> None:
    """Move the checked run to its place in results/ (a rename within one directory's file system)."""
    if os.path.lexists(destination):
        raise BadInputError(
            f"{destination}: exists and is not this run as this ledger records it; move it aside, "
            "then import the pack again"
        )
    os.rename(run_dir, destination)
    directory = os.open(destination.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _checked(pack: Pack, ours: Ledger, staging: Path, *, entry_path: str,
             note: str) -> ImportResult | PendingImport:
    """Extract the pack's run into `staging` and run every import check on it; each refusal names
    the pack, and the run's files as the pack names them (the staging directory is removed after)."""
    run_dir = extract_run(pack, staging)  # its refusals name the pack already
    try:
        run = verified_run(run_dir)
        _check_agrees(pack, run)
        return check_import(
            run, ours, lambda seal_index: _foreign(pack, ours, seal_index, staging),
            entry_path=entry_path, note=note,
        )
    except CapsuleError as error:
        message = str(error).replace(f"{staging}{os.sep}", "")
        kind = VerificationError if error.exit_code == VerificationError.exit_code else BadInputError
        raise kind(f"pack {pack.path}: {message}; nothing was written") from None


def import_pack(pack_path: Path, *, ledger_path: Path, note: str = "") -> ImportResult:
    """Check the pack `pack_path` and its run, place the run in results/<plan name>/<run_id>/ and
    append one `import` entry to `ledger_path`; see the module doc."""
    pack = read_pack(pack_path)
    ours = load_verified(ledger_path, "ledger", files=True,
                         remedy="pass --into with this repository's ledger")
    destination = ours.root / RESULTS_ROOT / _plan_name(pack) / pack.run_id
    entry_path = ours.relative(RunDir(destination).envelope)
    made: list[Path] = []
    kept = False
    staging: Path | None = None
    try:
        made = _make_directories(ours.root / RESULTS_ROOT, destination.parent)
        staging = Path(tempfile.mkdtemp(prefix=".import-", dir=destination.parent))
        checked = _checked(pack, ours, staging, entry_path=entry_path, note=note)
        if isinstance(checked, ImportResult):
            return checked
        _place(staging / pack.run_id, destination)
        try:
            result = checked.record(ours)
        except BaseException:
            shutil.rmtree(destination, ignore_errors=True)
            raise
        kept = True
        return result
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for directory in [] if kept else reversed(made):
            try:
                directory.rmdir()
            except OSError:
                break  # something else is in it now


def import_source(
    source: Path, *, foreign_ledger: Path | None, ledger_path: Path, note: str = ""
) -> ImportResult:
    """`capsule import`'s one entry point: a run directory with the other machine's ledger
    (`importing.import_run`, `--ledger` required), or a pack file (`import_pack`, which carries its
    own entries: `--ledger` refused)."""
    if source.is_dir():
        if foreign_ledger is None:
            raise BadInputError(
                f"{source} is a run directory: give --ledger THEIR_LEDGER, the ledger.jsonl of the machine "
                "it was made on (or import the file `capsule export` makes there, which carries its entries)"
            )
        return import_run(source, foreign_ledger=foreign_ledger, ledger_path=ledger_path, note=note)
    if foreign_ledger is not None:
        raise BadInputError(
            f"{source} is a run pack, which carries its own ledger entries: drop --ledger (--into names "
            "this repository's ledger)"
        )
    return import_pack(source, ledger_path=ledger_path, note=note)

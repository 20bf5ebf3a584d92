"""The undo journal of `capsule report --resign`: a re-sign killed at any point loses nothing.

Re-signing rewrites several files of a signed run (RESULTS.md, plots/, bundle.json, bundle.pub.pem,
bundle.dsse.json) and then appends a ledger entry; no single write covers them all, so a kill
between two of them would leave a run that verifies under neither signature. Before the first of
them changes, `snapshot` copies them into `RunDir.resign_journal` (beside the run directory, so it
is never bundled) and writes the journal's index last. Until `discard` removes it:

- `capsule verify` (and everything that verifies a run) refuses the run, naming the command that
  finishes the re-sign;
- the next `report --resign` calls `recover`: if the run verifies as it stands (the kill came after
  the new ledger entry) the journal is dropped; otherwise the snapshot is put back, which verifies
  as the run did before, and the re-sign starts over.

A journal without its index was still being written when the kill came: nothing in the run had
changed yet, so it is dropped.

The case it protects, and why nothing smaller does: a re-sign killed after the new RESULTS.md or
bundle.json is written but before the new envelope and its ledger entry (or after the envelope,
before the entry) leaves files that match neither signature; an atomic write per file cannot make
five files and a ledger append one step, and the old bytes exist nowhere else to re-sign from.
tests/unit/test_resign_crash.py kills a re-sign at each of its steps and shows the rerun recovering.

A journal is a file anyone with write access can plant, so nothing in it is trusted as a path:
every path it names must be one a re-sign may touch (a top-level document, a plot, a temporary), and
no part of a path below the run or the journal may be a symbolic link (nor may the journal itself).
A link is refused, never followed, so a copy or an unlink never lands outside the run.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from capsule.atomic import copy_atomic, write_json_atomic
from capsule.errors import VerificationError
from capsule.evidence.bundle import BUNDLE_OUTPUTS
from capsule.evidence.bundle_index import check_member_path
from capsule.jsonio import read_json_object
from capsule.run_dir import ENVELOPE, PLOTS, RESULTS, RunDir

INDEX = "undo.json"  # written last: its presence says the copies are complete
COPIES = "files"  # the copies, at their paths relative to the run directory
TOP_LEVEL = (RESULTS, *sorted(BUNDLE_OUTPUTS))  # the top-level files a re-sign may rewrite


_TEMPORARY = re.compile(r"\.(?:" + "|".join(re.escape(name) for name in TOP_LEVEL) + r")\.[^/]+\.part")


def _may_touch(relative: str) -> bool:
    """Whether a re-sign may rewrite, create or remove the run's file at `relative`: a top-level
    document, a temporary beside one, or a file directly under plots/."""
    parts = relative.split("/")
    if len(parts) == 1:
        return relative in TOP_LEVEL or bool(_TEMPORARY.fullmatch(relative))
    return len(parts) == 2 and parts[0] == PLOTS and parts[1] not in ("", ".", "..")


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise VerificationError(
            f"{path}: a symbolic link where a re-sign copies or removes files; it is never followed "
            "(it could point outside the run): remove it, then re-sign again"
        )


def _plain(root: Path, relative: str) -> Path:
    """`root / relative`, checked: no part of it below `root` is a symbolic link, and what exists
    there is a regular file (VerificationError otherwise)."""
    path = root
    for part in relative.split("/"):
        path = path / part
        _refuse_link(path)
    if os.path.lexists(path) and not path.is_file():
        raise VerificationError(f"{path}: not a regular file, where a re-sign keeps only files; remove it")
    return path


def _journal(run: RunDir) -> Path:
    """The run's journal directory, refused when it is a symbolic link or not a directory."""
    journal = run.resign_journal
    _refuse_link(journal)
    if journal.exists() and not journal.is_dir():
        raise VerificationError(f"{journal}: the re-sign journal is not a directory; remove it")
    return journal


def _in_scope(run: RunDir) -> list[str]:
    """The run's files a re-sign may rewrite, create or remove, as relative paths: the top-level
    ones, everything under plots/, and temporaries an atomic write killed midway left beside them.
    A symbolic link among them (plots/ itself included) is refused, never listed or followed."""
    _refuse_link(run.plots_dir)
    found = [name for name in TOP_LEVEL if os.path.lexists(run.path / name)]
    found += [path.name for name in TOP_LEVEL for path in run.path.glob(f".{name}.*.part")]
    if run.plots_dir.is_dir():
        found += [
            f"{PLOTS}/{path.name}"
            for path in run.plots_dir.iterdir()
            if path.is_symlink() or not path.is_dir()  # a folder is no plot; a link is refused below
        ]
    for relative in found:
        _plain(run.path, relative)
    return sorted(found)


def snapshot(run_dir: Path) -> None:
    """Copy every file a re-sign may change into the journal, the index last. Call it, under the run's
    lock, after the run verified and before anything in it is written."""
    run = RunDir(run_dir)
    journal = _journal(run)
    if journal.exists():  # `recover` runs first; a journal here now is a caller's bug, not user input
        raise RuntimeError(f"{journal} already exists; recover() it before taking a new snapshot")
    files = _in_scope(run)
    for relative in files:
        copy_atomic(run.path / relative, journal / COPIES / relative)
    write_json_atomic(journal / INDEX, {"run_id": run.path.name, "files": files})


def discard(run_dir: Path) -> None:
    """Remove the journal: the index first, so a kill while the copies go reads as 'nothing to undo'."""
    journal = _journal(RunDir(run_dir))
    _plain(journal, INDEX).unlink(missing_ok=True)
    shutil.rmtree(journal, ignore_errors=True)


def restore(run_dir: Path) -> None:
    """Put the snapshot back: every copied file over its path, and every file in scope that the
    snapshot did not hold (a new plot, a temporary) removed. Repeatable: a kill here leaves the
    journal, and the next `recover` restores again."""
    run = RunDir(run_dir)
    journal = _journal(run)
    index_path = _plain(journal, INDEX)
    index = read_json_object(index_path, "the re-sign journal", error=VerificationError)
    files = index.get("files")
    if not isinstance(files, list) or not all(isinstance(item, str) for item in files):
        raise VerificationError(f"{index_path}: field 'files' must be a list of paths; remove the journal")
    moves = []  # every path checked before the first file is copied or removed
    for item in files:
        relative = check_member_path(item, str(index_path))
        if not _may_touch(relative):
            raise VerificationError(
                f"{index_path}: names {relative!r}, which a re-sign never changes; remove the journal"
            )
        source = _plain(journal, f"{COPIES}/{relative}")
        if not source.is_file():
            raise VerificationError(f"{source}: missing from the re-sign journal; remove the journal")
        moves.append((source, _plain(run.path, relative)))
    extra = [_plain(run.path, relative) for relative in sorted(set(_in_scope(run)) - set(files))]
    for source, destination in moves:
        copy_atomic(source, destination)
    for path in extra:
        path.unlink()


def recover(run_dir: Path, verifies: Callable[[], object]) -> str | None:
    """Finish or undo an interrupted re-sign of `run_dir` (None when there was none): what was done,
    in one line. `verifies` checks the run as it stands, raising VerificationError when it does not."""
    journal = _journal(RunDir(run_dir))
    if not journal.exists():
        return None
    untouched = f"an interrupted re-sign had not changed {run_dir} yet; removed its journal {journal}"
    if not (journal / INDEX).is_file():
        discard(run_dir)
        return untouched
    try:
        verifies()
    except VerificationError:
        restore(run_dir)
        discard(run_dir)
        return f"put back the signed files an interrupted re-sign had replaced in {run_dir}"
    envelope = RunDir(run_dir).envelope
    copy = _plain(journal, f"{COPIES}/{ENVELOPE}")
    unchanged = copy.is_file() and copy.read_bytes() == envelope.read_bytes()
    discard(run_dir)
    if unchanged:  # killed after the snapshot, before any write: the old signature still stands
        return untouched
    return f"an interrupted re-sign of {run_dir} had finished (its ledger entry is there); removed {journal}"

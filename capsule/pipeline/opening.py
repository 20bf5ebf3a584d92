"""A run directory: `results/<plan>/<run_id>/`, created once per plan hash and resumed after a stop.

`run.json` fixes the run's identity when it starts (plan path and sha256, the ledger head, the start
time); a run directory made from other plan bytes is never reused, so results of two plans can never
mix. A finished run is never reopened: a later reproduce starts a new one. A sealed run is finished
once the ledger records it (`recorded_in`: its `bundle` entry, or the `import` entry of a run made on
another machine), a dry or ad-hoc run once its envelope is written (`signed`); a run killed while it
was being signed is therefore resumed, and signed again.
What else a run holds from its start, the sealed plan's copy and the machine's manifest, is written
here too.

One writer at a time: the run directory is opened under its lock (`capsule.locks`), held in the
caller's ExitStack until the caller is done writing; choosing or creating the run directory happens
under the lock of the directory that holds the plan's runs, so two processes started together never
pick the same new directory, nor both resume one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from capsule import __version__
from capsule.atomic import check_output_dir, make_directory, write_bytes_atomic
from capsule.errors import BadInputError, CapsuleError, VerificationError
from capsule.hashing import sha256_file
from capsule.locks import hold
from capsule.machine.diff import diff_manifests
from capsule.machine.manifest import build_manifest, load_manifest, manifest_digest, write_manifest
from capsule.machine.manifest_record import parse_manifest
from capsule.pipeline.run_start import RunStart, read_run_start, write_run_start
from capsule.prereg.ledger import DEFAULT_LEDGER, Ledger, utc_now, write_entry_copy
from capsule.prereg.ledger_entries import FileRecord
from capsule.prereg.loader import PLAN_FILE
from capsule.run_dir import RunDir

Say = Callable[[str], None]  # where the pipeline tells the user what it is doing (one line each)
Finished = Callable[[RunDir], bool]  # whether a run directory is finished (never to be reopened)
StartHead = Callable[[str], str]  # a new recorded run's id -> its start head (`Ledger.record_start`)
OPENING_WAIT_S = 10.0  # how long a process waits for another to finish choosing or creating its run


def signed(run: RunDir) -> bool:
    """A dry or ad-hoc run (no ledger entry) is finished once its envelope, written last, exists."""
    return run.envelope.exists()


def recorded_in(ledger: Ledger) -> Finished:
    """A sealed run is finished once `ledger` (as it is now) records its run id (`Ledger.records_run`:
    a `bundle` or an `import` entry); bundle files without such an entry are the trace of a signing
    that was interrupted. A run directory whose run.json cannot be read is never resumed either."""
    def finished(run: RunDir) -> bool:
        try:
            run_id = read_run_start(run.path).run_id
        except (OSError, CapsuleError):
            return False
        return ledger.current().records_run(run_id)
    return finished


@dataclass(frozen=True)
class OpenRun:
    """An open run directory (its layout) and its identity record."""
    dir: RunDir
    record: RunStart
    resumed: bool

    @property
    def path(self) -> Path:
        """The run directory's root."""
        return self.dir.path

    @property
    def run_id(self) -> str:
        """The run's id: UTC start time and a short plan hash."""
        return self.record.run_id


def new_run_id(plan_sha256: str, now: datetime | None = None) -> str:
    """`YYYYmmddTHHMMSSZ-<first 8 hex of the plan hash>`: sortable by time, names the plan bytes."""
    moment = now or datetime.now(UTC)
    return f"{moment.strftime('%Y%m%dT%H%M%SZ')}-{plan_sha256[:8]}"


def _resumable(results_root: Path, plan_sha256: str, finished: Finished) -> Path | None:
    if not results_root.is_dir():
        return None
    for candidate in sorted(results_root.iterdir(), reverse=True):
        record_path = RunDir(candidate).record
        if not record_path.is_file() or finished(RunDir(candidate)):
            continue
        try:
            record = read_run_start(candidate)
        except BadInputError:
            continue
        if record.plan_sha256 == plan_sha256:
            return candidate
    return None


def open_run_dir(
    *,
    results_root: Path,
    plan_path: str,
    plan_sha256: str,
    ledger_head: str | StartHead,
    held: ExitStack,
    explicit: Path | None = None,
    fresh: bool = False,
    finished: Finished = signed,
    option: str = "--run-dir",
) -> OpenRun:
    """Resume the latest unfinished run of these plan bytes, or start a new one, and hold its lock
    in `held` (BusyError naming the holder's pid if another process writes it).

    `explicit` names the directory: it is resumed if it belongs to this plan hash, refused if it
    belongs to another or is `finished`, and created if it does not exist (`option`: the calling
    command's name for it, used in refusals). `fresh` always starts a new run. `ledger_head`: the
    start head a new run records, or (a recorded run) a `StartHead` that appends the run's `start`
    entry to the ledger and returns its hash, called once the new run's directory is decided.
    """
    run_id = new_run_id(plan_sha256)
    if explicit is not None:
        check_output_dir(explicit, "run directory")
        _refuse_inside_a_run(explicit, option)
        held.enter_context(hold(explicit, f"run directory {explicit}"))
        return _open_at(explicit, run_id, plan_path, plan_sha256, ledger_head, finished, option)
    # held for milliseconds (choose, create): a second process waits for it, then meets the run's lock
    with hold(results_root, f"the runs in {results_root}", wait_s=OPENING_WAIT_S):
        found = None if fresh else _resumable(results_root, plan_sha256, finished)
        path = found or results_root / run_id
        if found is None and path.exists():
            raise BadInputError(f"{path}: a run of this plan started this very second; start again")
        held.enter_context(hold(path, f"run directory {path}"))
        return _open_at(path, run_id, plan_path, plan_sha256, ledger_head, finished, option)


def _refuse_inside_a_run(path: Path, option: str) -> None:
    """Refuse a run directory inside another run (`generate --dry-run --out RUN` makes RUN/dry-run/):
    a run's files are its own, and a signed run with one more file no longer verifies. Refuse one
    that is, or lies inside, a prereg folder (`prereg/` holding the ledger) or a plan's folder: sealed files
    live there, and a run is never one of them."""
    for parent in Path(path).absolute().parents:
        if RunDir(parent).record.is_file() or RunDir(parent).bundle.is_file():
            raise BadInputError(
                f"{path}: lies inside the run directory {parent}; a run never holds another: "
                f"choose a {option} outside it"
            )
    here = Path(path).absolute()
    for folder in (here, *here.parents):
        if folder.name == DEFAULT_LEDGER.parent.name and (folder / DEFAULT_LEDGER.name).is_file():
            what = "a prereg folder (it holds the ledger)"
        elif (folder / PLAN_FILE).is_file():
            what = "a plan's folder"
        else:
            continue
        raise BadInputError(
            f"{path}: {'is' if folder == here else 'lies inside'} {folder}, {what}; runs are never "
            f"written among sealed files: choose a {option} under results/ or runs/"
        )


#: What a run holds from its opening alone (`_open_at`, `copy_plan`, `start_manifest`, an ad-hoc
#: record), before a single row is generated.
def _opening_files(run: RunDir) -> set[Path]:
    return {run.record, run.plan, run.plan_seal, run.adhoc, run.manifest}


def remove_unused_run(run: RunDir) -> bool:
    """Remove a run directory that a failed command created and that holds nothing but what opening
    it wrote (no row, no score, no log): the failure leaves no empty run behind. Anything else in it
    (a symbolic link included) keeps the directory; returns whether it was removed."""
    opening = _opening_files(run)
    files, folders = [], []
    for path in sorted(run.path.rglob("*"), reverse=True):
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            return False
        if path.is_dir():
            folders.append(path)
        elif path in opening or path.stat().st_size == 0:
            files.append(path)
        else:
            return False
    for path in files:
        path.unlink()
    for folder in folders:
        folder.rmdir()
    run.path.rmdir()
    return True


def _open_at(
    explicit: Path, run_id: str, plan_path: str, plan_sha256: str, ledger_head: str | StartHead,
    finished: Finished, option: str,
) -> OpenRun:
    """Resume the run at `explicit` (checked: same plan bytes, not finished) or create it there with
    `run_id`; the caller holds its lock."""
    path = explicit
    if RunDir(explicit).record.exists():
        record = read_run_start(explicit)
        if record.plan_sha256 != plan_sha256:
            raise BadInputError(
                f"{explicit}: made from plan sha256 {record.plan_sha256[:12]}…, but {plan_path} is "
                f"{plan_sha256[:12]}…; results of different plans are never mixed: choose a new {option}"
            )
        if finished(RunDir(explicit)):
            raise BadInputError(f"{explicit}: already bundled (finished); choose a new {option}")
        return OpenRun(RunDir(explicit), record, resumed=True)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise BadInputError(
            f"{path}: exists and holds no run.json, so it is not a capsule run directory; {option} names "
            f"the run directory itself: give a new or empty one, or leave {option} out"
        )
    make_directory(path, "run directory")
    record = RunStart(
        run_id=run_id,
        plan_path=plan_path,
        plan_sha256=plan_sha256,
        ledger_head_at_start=ledger_head if isinstance(ledger_head, str) else ledger_head(run_id),
        started=utc_now(),
        capsule_version=__version__,
    )
    write_run_start(path, record)
    return OpenRun(RunDir(path), record, resumed=False)


def copy_plan(run: OpenRun, plan_bytes: bytes, seal: FileRecord) -> None:
    """Put the sealed plan's bytes and its ledger entry into the run directory once; on resume,
    refuse a copy that differs from the seal (the run directory was edited)."""
    copy = run.dir.plan
    if copy.exists():
        if sha256_file(copy) != seal.sha256:
            raise VerificationError(f"{copy}: differs from the sealed plan; the run directory was edited")
        return
    write_bytes_atomic(copy, plan_bytes)
    write_entry_copy(run.dir.plan_seal, seal)


# What a manifest reads from a live torch only (`capsule.machine.numerics`, `software.torch_build`)
_LIVE_TORCH = ("numerics.torch.", "numerics.threads.torch") + tuple(
    f"software.torch_build.{key}" for key in ("source", "cudnn", "nccl", "cpu_capability", "mkldnn")
)


def _unread_on_either_side(path: str, recorded: Any, current: Any) -> bool:
    """A torch flag that one of the two manifests did not read (torch was not imported in that
    process: a dry run or a fake-backend arm): nothing to compare, so no difference of machines."""
    return path.startswith(_LIVE_TORCH) and not (
        parse_manifest(recorded).torch_live and parse_manifest(current).torch_live
    )


def start_manifest(
    run: OpenRun,
    model_dir: Path | None,
    prompts_path: Path,
    say: Say,
    new_run_hint: str = "start a new run with --fresh",
) -> str:
    """Write the run's manifest.json at its first start and return its digest; on resume, refuse a
    machine whose numerics-relevant fingerprint differs from the recorded one (BadInputError; its
    message ends with `new_run_hint`, the calling command's way to start afresh)."""
    path = run.dir.manifest
    current = build_manifest(model_dir=model_dir, prompts_path=prompts_path)
    if not path.exists():
        return write_manifest(path, current)
    recorded = load_manifest(path)
    differences = [d for d in diff_manifests(recorded, current).in_category("numerics")
                   if not _unread_on_either_side(d.path, recorded, current)]
    if differences:
        listed = "; ".join(f"{d.path}: {d.a} -> {d.b}" for d in differences[:4])
        raise BadInputError(
            f"{run.path}: started on a machine whose numerics differ from this one ({listed}); "
            f"finish it there, or {new_run_hint}"
        )
    say("resuming on the same machine fingerprint (numerics-relevant fields equal)")
    return manifest_digest(recorded)

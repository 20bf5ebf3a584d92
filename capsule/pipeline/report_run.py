"""`capsule report RUN_DIR`'s work on a run directory: write its RESULTS.md and plots (a signed run's
only when nothing would change, since any change would break its signature), or check the file
against a fresh rendering (only a signed run, verified first as `capsule verify` does)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError, VerificationError
from capsule.evidence.bundle_index import read_index
from capsule.report.document import changed_outputs, check_report, render_outputs, write_report
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class ReportCheck:
    """A run's RESULTS.md against a fresh rendering: the unified diff (empty: identical) and one line
    saying which it is."""

    diff: list[str]
    verdict: str


def write_run_report(run_dir: Path, *, fingerprint: str | None, plots: bool) -> str:
    """Write RUN_DIR/RESULTS.md (and plots/ unless `plots` is False) and return the line to print.
    A signed run is left alone: one line when its report is already current, else BadInputError
    naming what would change."""
    run = RunDir(run_dir)
    if run.is_bundled:
        changed = changed_outputs(run_dir, render_outputs(run_dir, fingerprint=fingerprint, plots=plots))
        if changed:
            raise BadInputError(
                f"{run_dir} is signed ({run.bundle.name}) and rewriting would change {', '.join(changed)}; "
                f"see the difference with `capsule report {run_dir} --check`"
            )
        return f"{run_dir}: signed, and its report is already up to date"
    path = write_report(run_dir, fingerprint=fingerprint, plots=plots)
    return f"wrote {path}" + (f" and {run.plots_dir}/" if plots else "")


def check_run_report(run_dir: Path, ledger_path: Path) -> ReportCheck:
    """Re-render RUN_DIR's RESULTS.md and compare it with the file, once the run verifies against
    `ledger_path` as `capsule verify` checks it (VerificationError otherwise). An unsigned run is
    refused (exit 3): its analysis.json and RESULTS.md can be edited together, so agreeing with each
    other proves nothing; a dry run too (exit 2), whatever signed it."""
    run = RunDir(run_dir)
    if not Path(run_dir).is_dir():
        raise BadInputError(f"{run_dir}: not a directory; give a run directory")
    if not run.envelope.is_file():
        raise VerificationError(
            f"{run_dir}: not signed (no {run.envelope.name}), so its report is not evidence: a check would "
            f"compare an editable analysis with an editable report; finish it with `capsule reproduce`, "
            f"or rewrite an unsigned run's report with `capsule report {run_dir}`"
        )
    from capsule.evidence.compare import verify_side  # scipy: only for a signed run's check

    verify_side(run_dir, ledger_path)
    diff = check_report(run_dir, fingerprint=read_index(run_dir)[1].key.fingerprint)
    if diff:
        return ReportCheck(diff, f"{run.results}: differs from what {run.analysis} renders")
    return ReportCheck(diff, f"{run.results}: identical to a fresh rendering")

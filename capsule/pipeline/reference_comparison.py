"""The answer to "does it reproduce here": a new run compared with its plan's committed reference run.

`capsule reproduce` ends here once the run is signed and recorded. When `results/committed.toml`
names a reference run of the run's plan (`capsule.evidence.committed_runs`), both runs are compared
as `capsule compare NEW REFERENCE --key NEW/bundle.pub.pem` would (the new run's own key pinned,
since a newcomer's key is one the plan does not trust): a few lines for the terminal, and the whole
comparison written as a new file `results/<plan>/comparisons/<new>-vs-<reference>.md` beside the
runs, never inside the signed run. Nothing here can fail the run: any problem becomes one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capsule.evidence.committed_runs import read_committed_runs
from capsule.run_dir import RunDir

COMPARISONS = "comparisons"  # results/<plan>/comparisons/: comparison files beside a plan's runs


@dataclass(frozen=True)
class ReferenceComparison:
    """What the closing comparison found: lines to print, and the file written (None if it failed)."""

    reference: Path
    lines: tuple[str, ...]
    file: Path | None
    check_command: str | None  # the check-numbers command that keeps the file true


def comparison_path(run: Path, reference: Path) -> Path:
    """Where the comparison of `run` with `reference` is written: beside the plan's runs."""
    return run.parent / COMPARISONS / f"{run.name}-vs-{reference.name}.md"


def compare_with_reference(run: Path, plan_path: str, ledger_path: Path, *, pinned: bool
                           ) -> ReferenceComparison | None:
    """Compare the signed run `run` of `plan_path` with that plan's committed reference run, or None
    when the repository (the ledger's root) names none. `pinned`: the run's key is one the plan does
    not trust, so it is pinned as `--key`. Never raises for a failed comparison: its problem is the
    one line returned, and no file is written."""
    root = ledger_path.parent.parent  # relative where the ledger's path is: paths print as given
    try:
        reference = read_committed_runs(root).reference_for(plan_path)
    except Exception as error:  # a broken committed.toml must not fail a signed run
        return ReferenceComparison(root, (f"no comparison with a reference run: {error}",), None, None)
    if reference is None or reference.path.resolve() == run.resolve():
        return None
    try:
        return _compare(run, reference.path, ledger_path, pinned)
    except Exception as error:  # the run is signed already; whatever failed here is one line
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        return ReferenceComparison(
            reference.path, (f"the comparison with the reference run failed: {message}",), None, None
        )


def _compare(run: Path, reference: Path, ledger_path: Path, pinned: bool) -> ReferenceComparison:
    from capsule.evidence.compare import compare_runs
    from capsule.report.comparison import against_reference_lines, write_comparison_file

    key = RunDir(run).public_key
    comparison = compare_runs(run, reference, ledger_path=ledger_path, keys=(key,) if pinned else ())
    out = comparison_path(run, reference)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_comparison_file(out, comparison, (run, reference))
    check = f"capsule check-numbers {out}" + (f" --key {key}" if pinned else "")
    return ReferenceComparison(reference, tuple(against_reference_lines(comparison)), out, check)

"""A finished run: signed, analysed, every arm's generations complete; what compare and import read.

Checked before anything is compared or appended, so an interrupted or truncated run is refused with
one line (BadInputError, exit 2) naming what is missing, rather than compared on half its prompts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from capsule.analysis.codec import read_analysis
from capsule.errors import BadInputError
from capsule.generation.arm_sidecar import load_sidecar
from capsule.generation.arm_status import arm_done, recorded_status
from capsule.prereg.backend_specs import FAKE_BACKEND
from capsule.prereg.plan_tables import plan_arm_backends
from capsule.run_dir import RunDir


def check_complete(run_dir: Path) -> list[str]:
    """The run's arm names, once the run is complete: signed, analysed, every arm's generations
    complete (BadInputError naming what is missing otherwise)."""
    run = RunDir(run_dir)
    for path, what in ((run.envelope, "no signed bundle"), (run.analysis, "no analysis.json")):
        if not path.is_file():
            raise BadInputError(
                f"{run_dir}: run is incomplete ({what}); finish it with `capsule reproduce` first"
            )
    arms = list(read_analysis(run.analysis).arms)
    for arm in arms:
        if not arm_done(run, arm):
            status = recorded_status(run, arm) or "missing"
            raise BadInputError(
                f"{run.generations_meta(arm)}: arm {arm} is {status}, not complete; the run is "
                "incomplete (finish it with `capsule reproduce`)"
            )
    return arms


def check_not_dry_run(run_dir: Path, arms: Iterable[str] | None = None) -> None:
    """Refuse a dry run (BadInputError, exit 2): a run any of whose arms ran on the fake backend while
    its plan (the run's own plan.toml copy) declares another. Its rows are random tokens, whatever
    ledger it was signed against, so it is never evidence: not imported, compared or quoted.
    `arms`: the arms to look at (default: every arm of the plan that has a sidecar)."""
    run = RunDir(run_dir)
    try:
        declared = plan_arm_backends(run.plan.read_bytes(), run.plan)
    except OSError as error:
        raise BadInputError(f"{run.plan}: the run's plan copy cannot be read ({error.strerror})") from None
    names = list(arms) if arms is not None else [a for a in declared if run.generations_meta(a).is_file()]
    for arm in names:
        sidecar = load_sidecar(run.generations_meta(arm))
        ran = {sidecar.declared_backend, sidecar.ran_backend}
        if FAKE_BACKEND in ran and declared.get(arm) != FAKE_BACKEND:
            raise BadInputError(
                f"{run.generations_meta(arm)}: arm {arm} ran on the fake backend, its plan declares "
                f"{declared.get(arm)!r}: a dry run (random tokens) is never evidence (never imported, "
                "compared or quoted); run the plan for real"
            )

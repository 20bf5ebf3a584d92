"""`capsule compare`: two runs of the same sealed plan, typically from two machines, checked, then compared.

This module checks both runs: complete (a signed bundle, every planned arm's generations complete),
verified (signature and every digest; against this repository's ledger too when it records the
run), and made from the same plan bytes. `capsule.analysis.compare` then computes the comparison
(per arm: identity, first divergence, every metric's paired difference; the verdicts side by side),
and the manifests' numerics-relevant differences are listed as the candidate causes.

Refusals: an incomplete run or runs of different plans raise BadInputError (exit 2); a run that
fails verification raises VerificationError (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from capsule.analysis.codec import read_analysis
from capsule.analysis.compare import (
    LABELS,
    ArmMachines,
    RunComparison,
    RunSide,
    claim_verdicts,
    compare_arms,
    comparison_verdicts,
)
from capsule.errors import BadInputError, VerificationError
from capsule.evidence.arm_machines import arm_digests, machine_manifest
from capsule.evidence.bundle_index import PlanRef, read_index_or_none
from capsule.evidence.finished import check_complete, check_not_dry_run
from capsule.evidence.signing import fingerprint_of, read_public_key
from capsule.evidence.verify import VerifySummary, verify_run, verify_unrecorded
from capsule.machine.diff import NUMERICS, Difference, diff_manifests
from capsule.machine.manifest import load_manifest, manifest_digest
from capsule.prereg.ledger import Ledger
from capsule.report.comparison import COMPARISON_BLOCKS
from capsule.run_dir import RunDir


def require_ledger(ledger_path: Path) -> None:
    """A checker that verifies runs needs the ledger it names: a missing file is never "no ledger"
    (which would let an untrusted run through as signature and digests only): BadInputError, exit 2."""
    if not ledger_path.is_file():
        raise BadInputError(
            f"ledger {ledger_path} not found: runs are verified against a ledger; run from the "
            "repository root (prereg/ledger.jsonl) or pass --ledger PATH"
        )


def run_in_ledger(ledger_path: Path, run_id: str) -> bool:
    """Whether this repository's ledger records the run (a local `bundle` or an `import` entry)."""
    require_ledger(ledger_path)
    return Ledger.load(ledger_path).records_run(run_id)


def pinned_key_for(run_dir: Path, keys: Sequence[Path]) -> Path | None:
    """The key among `keys` (public key PEMs given with `--key`) whose fingerprint is the one the run's
    bundle names as its signer, or None: each side of a comparison is pinned by its own key."""
    index = read_index_or_none(run_dir)
    fingerprint = index.key.fingerprint if index is not None else None
    return next((key for key in keys if key_fingerprint(key) == fingerprint), None)


def key_fingerprint(key: Path) -> str:
    """The fingerprint of the public key PEM `key` (BadInputError, exit 2, if it is not one)."""
    try:
        return fingerprint_of(read_public_key(key))
    except VerificationError as error:
        raise BadInputError(f"--key {key}: {error}") from None


def verify_side(run_dir: Path, ledger_path: Path, keys: Sequence[Path] = ()) -> VerifySummary:
    """The one place `compare` (and `check-numbers`, `report --check`) verifies a run: signature and
    every digest, the ledger entry when this repository's ledger records the run, and otherwise the
    same trust rule against that ledger; a key of `keys` that signed the run is pinned, as
    `verify --key` pins it (VerificationError, exit 3, on any failure; a missing ledger is exit 2).
    A dry run is refused once its files verify (BadInputError, exit 2): signed or not, its rows are
    random tokens, never evidence."""
    require_ledger(ledger_path)
    pinned = pinned_key_for(run_dir, keys)
    index = read_index_or_none(run_dir)
    if index is not None and run_in_ledger(ledger_path, index.run_id):
        summary = verify_run(run_dir, pubkey=pinned, ledger_path=ledger_path)
    else:
        summary = verify_unrecorded(run_dir, ledger_path, pinned)
    check_not_dry_run(run_dir)
    return summary


def check_same_plan(run_a: Path, run_b: Path) -> None:
    """Both runs must name the same plan path and bytes (BadInputError, exit 2)."""
    plan_a, plan_b = (_plan_of(run) for run in (run_a, run_b))
    if plan_a != plan_b:
        raise BadInputError(
            f"{run_a} and {run_b} are runs of different plans ({_plan_text(plan_a)} vs "
            f"{_plan_text(plan_b)}); compare runs of one sealed plan"
        )


def check_two_runs(run_a: Path, run_b: Path) -> None:
    """The two sides must be two runs (BadInputError, exit 2): a run's identity is its run id, so a
    byte copy of a run under another directory name is the same run, not a second one agreeing
    with it."""
    id_a, id_b = (_run_id_of(run) for run in (run_a, run_b))
    if id_a is not None and id_a == id_b:
        raise BadInputError(
            f"{run_a} and {run_b} are the same run (run id {id_a}): a copy under another name is not a "
            "second run; compare two runs of the plan"
        )


def _plan_of(run_dir: Path) -> PlanRef | None:
    index = read_index_or_none(run_dir)
    return index.plan if index is not None else None


def _run_id_of(run_dir: Path) -> str | None:
    index = read_index_or_none(run_dir)
    return index.run_id if index is not None else None


def _plan_text(plan: PlanRef | None) -> str:
    return "unknown" if plan is None else f"{plan.path} sha256 {plan.sha256[:12]}"


def _manifest(run: RunDir) -> dict[str, Any]:
    if not run.manifest.is_file():
        raise BadInputError(f"{run.manifest}: missing; is the run complete?")
    return load_manifest(run.manifest)  # validated: diff_manifests walks it field by field


def check_keys_used(runs: Sequence[Path], keys: Sequence[Path]) -> None:
    """Every key given with `--key` must have signed one of `runs` (BadInputError, exit 2): a pin that
    pins nothing is a mistake (the wrong file, the wrong run) that would otherwise pass unseen."""
    for key in keys:
        if not any(pinned_key_for(run, [key]) for run in runs):
            raise BadInputError(
                f"--key {key}: key {key_fingerprint(key)[:16]} signed neither "
                f"{' nor '.join(map(str, runs))}; pin the bundle.pub.pem of the run you mean"
            )


def compare_runs(run_a: Path, run_b: Path, *, ledger_path: Path, keys: Sequence[Path] = ()) -> RunComparison:
    """Compare two complete, verified runs of one plan; see the module doc. `keys`: public keys pinned
    with `--key`, each for the side it signed."""
    arm_names = check_complete(run_a)
    check_complete(run_b)
    check_same_plan(run_a, run_b)  # a plain refusal (exit 2) before either is verified
    require_ledger(ledger_path)
    check_keys_used((run_a, run_b), keys)
    summaries = [verify_side(path, ledger_path, keys) for path in (run_a, run_b)]
    check_two_runs(run_a, run_b)  # after: a re-signed copy is refused by its verification first
    dirs = (RunDir(run_a), RunDir(run_b))
    analysis_a, analysis_b = (read_analysis(run.analysis) for run in dirs)
    sides = {
        label: RunSide(
            str(path), summary.run_id, summary.line(), summary.ledger_path is not None, summary.n_files,
            summary.total_bytes, summary.fingerprint,
            summary.bundle_seq if summary.ledger_path is not None else None, summary.trusted_by,
        )
        for label, path, summary in zip(LABELS, (run_a, run_b), summaries, strict=True)
    }
    plan = _plan_of(run_a)
    return RunComparison(
        None if plan is None else {"path": plan.path, "sha256": plan.sha256},
        sides,
        claim_verdicts(analysis_a, analysis_b),
        comparison_verdicts(analysis_a, analysis_b),
        compare_arms(analysis_a, arm_names, *dirs),
        tuple(diff_manifests(_manifest(dirs[0]), _manifest(dirs[1])).in_category(NUMERICS)),
        per_arm_machines(dirs, arm_names),
    )


def per_arm_machines(dirs: tuple[RunDir, RunDir], arms: Sequence[str]) -> tuple[ArmMachines, ...]:
    """Each arm that either run generated on another Ray node than its own machine
    (`capsule.evidence.arm_machines`), with the two machines and, where each side is one machine,
    their numerics-relevant differences. Empty for runs made on one machine each."""
    own = [manifest_digest(_manifest(run)) for run in dirs]
    found = []
    for arm in arms:
        digests = [arm_digests(run, arm) for run in dirs]
        if all(held == (mine,) for held, mine in zip(digests, own, strict=True)):
            continue  # made on each run's own machine
        labels = [_machine_label(held, mine) for held, mine in zip(digests, own, strict=True)]
        causes: tuple[Difference, ...] = ()
        if all(len(held) == 1 for held in digests):
            a, b = (machine_manifest(run, held[0]) for run, held in zip(dirs, digests, strict=True))
            causes = tuple(diff_manifests(a, b).in_category(NUMERICS))
        found.append(ArmMachines(arm, labels[0], labels[1], causes))
    return tuple(found)


def _machine_label(digests: tuple[str, ...], own: str) -> str:
    if len(digests) > 1:
        return f"{len(digests)} machines"
    return "run" if digests[0] == own else f"node {digests[0][:12]}"


def comparison_renderer(ledger_path: Path, keys: Sequence[Path] = ()
                        ) -> Callable[[str, Path, Path, tuple[str, str]], str]:
    """A `capsule.report.numbers.ComparisonRenderer` that verifies both runs against `ledger_path`
    (`keys`: pinned with `--key`, for the runs they signed)."""
    def render(block: str, run_a: Path, run_b: Path, names: tuple[str, str]) -> str:
        used = [key for key in keys if pinned_key_for(run_a, [key]) or pinned_key_for(run_b, [key])]
        comparison = compare_runs(run_a, run_b, ledger_path=ledger_path, keys=used)
        return COMPARISON_BLOCKS[block](comparison.named(names))
    return render

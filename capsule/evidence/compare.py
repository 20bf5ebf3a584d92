"""`capsule compare`: two runs of the same sealed plan, typically from two machines, arm by arm.

Both runs are checked first: complete (a signed bundle, every planned arm's generations complete),
verified (signature and every digest; against this repository's ledger too when it records the
run), and made from the same plan bytes. Then, per arm, on the prompts both runs scored: how many
responses are byte-identical, where the others first diverge, and the difference A - B on every
metric with exact McNemar and a paired bootstrap interval (the plan's verdict confidence, resamples
and seed). The claim's verdict and every sealed comparison's verdict are set side by side, and the
manifests' numerics-relevant differences are listed as the candidate causes.

Refusals: an incomplete run or runs of different plans raise BadInputError (exit 2); a run that
fails verification raises VerificationError (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from capsule.analysis.divergence import identity_contrast
from capsule.analysis.outcomes import outcomes_from_scores
from capsule.analysis.paired import paired_comparison
from capsule.errors import BadInputError
from capsule.evidence.finished import check_complete, read_analysis, read_bundle
from capsule.evidence.verify import VerifySummary, verify_run, verify_unrecorded
from capsule.jsonio import read_json, read_jsonl_complete
from capsule.machine.diff import NUMERICS, diff_manifests
from capsule.prereg.ledger import Ledger
from capsule.prereg.metrics import ALL_METRICS
from capsule.report.comparison import COMPARISON_BLOCKS
from capsule.run_dir import RunDir

LABELS = ("A", "B")


@dataclass(frozen=True)
class RunSide:
    """One run as compared: where it is, what verified, and its analysis."""

    path: str
    run_id: str
    verified: str  # the verifier's one-line summary (names the ledger's length: printed, not quoted)
    in_ledger: bool  # checked against this repository's ledger (else signature and digests only)
    n_files: int  # files whose size and sha256 matched the signed bundle
    total_bytes: int
    fingerprint: str  # the signing key's sha256 fingerprint
    ledger_seq: int | None  # the ledger entry recording the run (bundle or import); None: not in it
    analysis: dict[str, Any]


def run_in_ledger(ledger_path: Path, run_id: str) -> bool:
    """Whether this repository's ledger records the run (a local `bundle` or an `import` entry)."""
    if not ledger_path.is_file():
        return False
    return Ledger.load(ledger_path).records_run(run_id)


def verify_side(run_dir: Path, ledger_path: Path) -> VerifySummary:
    """The one place `compare` (and `check-numbers`) verifies a run: signature and every digest, the
    ledger entry when this repository's ledger records the run, and otherwise the same trust rule
    against that ledger when there is one (VerificationError, exit 3, on any failure)."""
    run_id = read_bundle(run_dir).get("run_id")
    if isinstance(run_id, str) and run_in_ledger(ledger_path, run_id):
        return verify_run(run_dir, pubkey=None, ledger_path=ledger_path)
    if ledger_path.is_file():
        return verify_unrecorded(run_dir, ledger_path)
    return verify_run(run_dir, pubkey=None, ledger_path=None)


def check_same_plan(run_a: Path, run_b: Path) -> None:
    """Both runs must name the same plan path and bytes (BadInputError, exit 2)."""
    plan_a, plan_b = read_bundle(run_a).get("plan"), read_bundle(run_b).get("plan")
    if plan_a != plan_b:
        raise BadInputError(
            f"{run_a} and {run_b} are runs of different plans ({_plan_text(plan_a)} vs "
            f"{_plan_text(plan_b)}); compare runs of one sealed plan"
        )


def _plan_text(plan: Any) -> str:
    if not isinstance(plan, dict):
        return "unknown"
    return f"{plan.get('path')} sha256 {str(plan.get('sha256'))[:12]}"


def _rows(run: RunDir, arm: str, scores: bool) -> list[dict[str, Any]]:
    return read_jsonl_complete(run.scores(arm) if scores else run.generations(arm))


def _verdict_of(analysis: dict[str, Any]) -> str | None:
    headline = analysis.get("headline") or {}
    return headline.get("verdict") if isinstance(headline, dict) else None


def compare_arm(rule: dict[str, Any], metric_of_claim: str, arm: str, run_a: RunDir, run_b: RunDir
                ) -> dict[str, Any]:
    """Identity, first divergence and every metric's paired difference for one arm of both runs."""
    identity = identity_contrast(_rows(run_a, arm, False), _rows(run_b, arm, False))
    scores_a, scores_b = _rows(run_a, arm, True), _rows(run_b, arm, True)
    outcomes_a = outcomes_from_scores(scores_a, run_a.scores(arm).as_posix()) if scores_a else None
    outcomes_b = outcomes_from_scores(scores_b, run_b.scores(arm).as_posix()) if scores_b else None
    metrics = {
        metric: asdict(paired_comparison(
            LABELS, outcomes_a, outcomes_b, metric, float(rule["confidence"]),
            min_pairs=int(rule["min_pairs"]), resamples=int(rule["bootstrap_resamples"]),
            seed=int(rule["bootstrap_seed"]),
        ))
        for metric in ALL_METRICS
    }
    prompt_flips = metrics[metric_of_claim]["b"] + metrics[metric_of_claim]["c"]
    return {
        "arm": arm,
        "identity": asdict(identity),
        "metrics": metrics,
        "pass_fail_changed": prompt_flips,
    }


def _comparison_verdicts(analysis_a: dict[str, Any], analysis_b: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(set(analysis_a.get("comparisons") or {}) | set(analysis_b.get("comparisons") or {})):
        va = (analysis_a.get("comparisons") or {}).get(name, {}).get("verdict")
        vb = (analysis_b.get("comparisons") or {}).get(name, {}).get("verdict")
        out[name] = {"A": va, "B": vb, "agree": va == vb}
    return out


def _manifest(run: RunDir) -> dict[str, Any]:
    if not run.manifest.is_file():
        raise BadInputError(f"{run.manifest}: missing; is the run complete?")
    value = read_json(run.manifest, "manifest")
    return value if isinstance(value, dict) else {}


def compare_runs(run_a: Path, run_b: Path, *, ledger_path: Path) -> dict[str, Any]:
    """Compare two complete, verified runs of one plan; see the module doc. Returns a JSON-ready dict."""
    arm_names = check_complete(run_a)
    check_complete(run_b)
    check_same_plan(run_a, run_b)  # a plain refusal (exit 2) before either is verified
    summaries = [verify_side(path, ledger_path) for path in (run_a, run_b)]
    dirs = (RunDir(run_a), RunDir(run_b))
    analyses = [read_analysis(path) for path in (run_a, run_b)]
    rule, claim = analyses[0]["verdict_rule"], analyses[0]["claim"]
    sides = [
        RunSide(
            str(path), summary.run_id, summary.line(), summary.ledger_path is not None, summary.n_files,
            summary.total_bytes, summary.fingerprint,
            summary.bundle_seq if summary.ledger_path is not None else None, analysis,
        )
        for path, summary, analysis in zip((run_a, run_b), summaries, analyses, strict=True)
    ]
    arms = [compare_arm(rule, claim["metric"], arm, *dirs) for arm in arm_names]
    verdict_a, verdict_b = (_verdict_of(a) for a in analyses)
    diff = diff_manifests(_manifest(dirs[0]), _manifest(dirs[1]))
    return {
        "schema": "capsule.compare/1",
        "plan": read_bundle(run_a).get("plan"),
        "runs": {label: {k: v for k, v in asdict(side).items() if k != "analysis"}
                 for label, side in zip(LABELS, sides, strict=True)},
        "claim": {
            "arm": rule["arm"], "metric": claim["metric"], "value_pct": claim["value_pct"],
            "A": verdict_a, "B": verdict_b, "agree": verdict_a == verdict_b,
        },
        "comparisons": _comparison_verdicts(*analyses),
        "arms": arms,
        "candidate_causes": [asdict(d) for d in diff.in_category(NUMERICS)],
    }


def named(comparison: dict[str, Any], names: tuple[str, str]) -> dict[str, Any]:
    """`comparison` with its runs' paths replaced by `names` (as a marker or a user wrote them)."""
    runs = {
        label: {**comparison["runs"][label], "path": name}
        for label, name in zip(LABELS, names, strict=True)
    }
    return {**comparison, "runs": runs}


def comparison_renderer(ledger_path: Path) -> Callable[[str, Path, Path, tuple[str, str]], str]:
    """A `capsule.report.numbers.ComparisonRenderer` that verifies both runs against `ledger_path`."""
    def render(block: str, run_a: Path, run_b: Path, names: tuple[str, str]) -> str:
        comparison = named(compare_runs(run_a, run_b, ledger_path=ledger_path), names)
        return COMPARISON_BLOCKS[block](comparison)
    return render

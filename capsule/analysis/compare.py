"""Two runs of one plan compared arm by arm: the statistics `capsule compare` prints.

`capsule.evidence.compare` checks both runs first (complete, verified, the same plan bytes); this
module then compares them. Per arm, on the prompts both runs scored: how many responses are
byte-identical, where the others first diverge, and the difference A - B on every metric with exact
McNemar and a paired bootstrap interval at the plan's verdict confidence, resamples and seed (read
from run A's analysis, the same plan as B's). The claim's verdict and every sealed comparison's
verdict are set side by side. The result is a `RunComparison`: typed records that
`capsule.report.comparison` renders; `RunComparison.to_json` alone turns it into what `--json` prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from capsule.analysis.control_schema import Identity
from capsule.analysis.divergence import identity_contrast
from capsule.analysis.outcomes import outcomes_from_scores
from capsule.analysis.paired import paired_comparison
from capsule.analysis.paired_schema import Paired
from capsule.analysis.schema import Analysis
from capsule.jsonio import read_jsonl_complete
from capsule.machine.diff import Difference
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import VerdictRule
from capsule.run_dir import RunDir

SCHEMA = "capsule.compare/1"
LABELS = ("A", "B")


@dataclass(frozen=True)
class RunSide:
    """One run as compared: where it is and what verified."""

    path: str
    run_id: str
    verified: str  # the verifier's one-line summary (names the ledger's length: printed, not quoted)
    in_ledger: bool  # checked against this repository's ledger (else signature and digests only)
    n_files: int  # files whose size and sha256 matched the signed bundle
    total_bytes: int
    fingerprint: str  # the signing key's sha256 fingerprint
    ledger_seq: int | None  # the ledger entry recording the run (bundle or import); None: not in it
    trusted_by: str = ""  # how its signature is trusted: by the plan, a signers entry, or only --key


@dataclass(frozen=True)
class VerdictPair:
    """One verdict in run A and in run B (None where a run lacks it)."""

    a: str | None
    b: str | None

    @property
    def agree(self) -> bool:
        """Whether both runs reached the same verdict."""
        return self.a == self.b

    def to_json(self) -> dict[str, Any]:
        """As `--json` prints it: A, B and whether they agree."""
        return {"A": self.a, "B": self.b, "agree": self.agree}


@dataclass(frozen=True)
class ClaimVerdicts(VerdictPair):
    """The claim (its verdict arm, metric and value) with each run's headline verdict."""

    arm: str
    metric: str
    value_pct: float

    def to_json(self) -> dict[str, Any]:
        """As `--json` prints it: the claim, then A, B and whether they agree."""
        return {"arm": self.arm, "metric": self.metric, "value_pct": self.value_pct, **super().to_json()}


@dataclass(frozen=True)
class ArmComparison:
    """One arm of both runs: identity, first divergence, every metric's paired difference, and how
    many prompts' pass/fail on the claim's metric changed."""

    arm: str
    identity: Identity
    metrics: dict[str, Paired]  # in ALL_METRICS order
    pass_fail_changed: int

    @property
    def responses_differ(self) -> int:
        """Prompts both runs scored whose responses are not byte-identical."""
        return self.identity.n_common - self.identity.identical_response


@dataclass(frozen=True)
class ArmMachines:
    """An arm that lanes on a Ray cluster generated on another node than its run's machine (in A or
    B): the machine on each side (`run` or `node <digest>`, or how many machines), and the
    numerics-relevant differences between the two where each side is one machine."""

    arm: str
    a: str
    b: str
    causes: tuple[Difference, ...]


@dataclass(frozen=True)
class RunComparison:
    """Everything `capsule compare` found about two runs of one plan."""

    plan: dict[str, Any] | None  # the bundle's plan (path and sha256)
    runs: dict[str, RunSide]  # by label, A then B
    claim: ClaimVerdicts
    comparisons: dict[str, VerdictPair]  # every sealed comparison, by name, sorted
    arms: tuple[ArmComparison, ...]  # plan order
    candidate_causes: tuple[Difference, ...]  # the manifests' numerics-relevant differences
    arm_machines: tuple[ArmMachines, ...] = ()  # arms generated on other Ray nodes than their run's machine

    def named(self, names: tuple[str, str]) -> RunComparison:
        """This comparison with its runs' paths replaced by `names` (as a marker or a user wrote them)."""
        paths = zip(LABELS, names, strict=True)
        return replace(self, runs={label: replace(self.runs[label], path=name) for label, name in paths})

    def to_json(self) -> dict[str, Any]:
        """The JSON `capsule compare --json` prints (schema `capsule.compare/1`)."""
        return {
            "schema": SCHEMA,
            "plan": self.plan,
            "runs": {label: asdict(side) for label, side in self.runs.items()},
            "claim": self.claim.to_json(),
            "comparisons": {name: pair.to_json() for name, pair in self.comparisons.items()},
            "arms": [asdict(arm) for arm in self.arms],
            "candidate_causes": [asdict(cause) for cause in self.candidate_causes],
            **({"arm_machines": [asdict(arm) for arm in self.arm_machines]} if self.arm_machines else {}),
        }


def _rows(run: RunDir, arm: str, scores: bool) -> list[dict[str, Any]]:
    return read_jsonl_complete(run.scores(arm) if scores else run.generations(arm))


def compare_arm(rule: VerdictRule, metric_of_claim: str, arm: str, run_a: RunDir, run_b: RunDir
                ) -> ArmComparison:
    """Identity, first divergence and every metric's paired difference for one arm of both runs."""
    identity = identity_contrast(_rows(run_a, arm, False), _rows(run_b, arm, False))
    scores_a, scores_b = _rows(run_a, arm, True), _rows(run_b, arm, True)
    outcomes_a = outcomes_from_scores(scores_a, run_a.scores(arm).as_posix()) if scores_a else None
    outcomes_b = outcomes_from_scores(scores_b, run_b.scores(arm).as_posix()) if scores_b else None
    metrics = {
        metric: paired_comparison(
            LABELS, outcomes_a, outcomes_b, metric, float(rule.confidence),
            min_pairs=int(rule.min_pairs), resamples=int(rule.bootstrap_resamples),
            seed=int(rule.bootstrap_seed),
        )
        for metric in ALL_METRICS
    }
    claimed = metrics[metric_of_claim]
    return ArmComparison(arm, identity, metrics, claimed.b + claimed.c)


def comparison_verdicts(analysis_a: Analysis, analysis_b: Analysis) -> dict[str, VerdictPair]:
    """Every sealed comparison's verdict in run A and run B (None where a run lacks it), by name."""
    out: dict[str, VerdictPair] = {}
    for name in sorted(set(analysis_a.comparisons) | set(analysis_b.comparisons)):
        found = (analysis_a.comparisons.get(name), analysis_b.comparisons.get(name))
        va, vb = (None if section is None else section.verdict for section in found)
        out[name] = VerdictPair(va, vb)
    return out


def claim_verdicts(analysis_a: Analysis, analysis_b: Analysis) -> ClaimVerdicts:
    """The claim (its verdict arm, metric and value) with each run's headline verdict side by side."""
    rule, claim = analysis_a.verdict_rule, analysis_a.claim
    return ClaimVerdicts(
        analysis_a.headline.verdict, analysis_b.headline.verdict, rule.arm, claim.metric, claim.value_pct
    )


def compare_arms(analysis_a: Analysis, arm_names: list[str], run_a: RunDir, run_b: RunDir
                 ) -> tuple[ArmComparison, ...]:
    """`compare_arm` for each of `arm_names`, under run A's verdict rule and claim metric."""
    rule, metric = analysis_a.verdict_rule, analysis_a.claim.metric
    return tuple(compare_arm(rule, metric, arm, run_a, run_b) for arm in arm_names)

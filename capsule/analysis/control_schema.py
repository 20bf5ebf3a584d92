"""The schema of the control sections of analysis.json (see `capsule.analysis.schema`).

Every section carries its control's kind, arms, description and failures; a control that could not
run is a `SkippedControl` saying why. The generation sections come from `capsule.analysis.controls`,
the scorer sections from `capsule.analysis.scorer_controls`. analysis.json is decoded by kind
(`section_type`: the kind's row in `capsule.prereg.control_kinds` names its section), never by which
class's fields the keys happen to fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from capsule.analysis.fields import omittable
from capsule.analysis.paired_schema import Paired
from capsule.errors import BadInputError
from capsule.prereg.control_kinds import control_kind, resolve


@dataclass(frozen=True)
class Divergence:
    """First-divergence indices of the differing outputs: count, min, median, max, values, unit."""

    n: int
    min: int | None
    median: int | float | None
    max: int | None
    indices: list[int]
    unit: str | None  # "output_ids", "tokenize", "characters", or several joined by "+"


@dataclass(frozen=True)
class Identity:
    """Output identity of two arms on their common prompts (`capsule.analysis.divergence`)."""

    n_common: int
    only_in_a: int
    only_in_b: int
    identical: int  # byte-identical full outputs
    identical_response: int  # identical scored responses
    input_ids_mismatch: list[int]  # keys whose input ids differ
    first_divergence: Divergence


@dataclass(frozen=True)
class IdentityPair(Identity):
    """Identity of one pair of a control's arms."""

    arms: list[str]


@dataclass(frozen=True)
class PairSettings:
    """The settings a contrast pair may differ in."""

    backend: str
    batch_size: int
    dtype: str


@dataclass(frozen=True)
class ContrastPair(IdentityPair):
    """A batch-size or backend pair: identity, the settings and the paired test."""

    settings: dict[str, PairSettings]
    paired: Paired


@dataclass(frozen=True)
class SourcePair:
    """A seed-vs-batch pair differing in one source (seed or batch size)."""

    arms: list[str]
    fixed: dict[str, int]  # the setting held fixed: {"seed": s} or {"batch_size": b}
    n_pairs: int
    identical: int
    discordant: int
    discordant_share: float | None
    difference_pct: float | None
    paired: Paired


@dataclass(frozen=True)
class SourceSummary:
    """Mean discordant share and mean |difference| over the pairs of one source."""

    pairs: int
    mean_discordant_share: float | None
    mean_abs_difference_pct: float | None


@dataclass(frozen=True)
class StabilityMetric:
    """One metric over the unseeded scorer runs, with the seeded value for reference."""

    min_pct: float | None
    max_pct: float | None
    spread_pct: float | None
    seeded_pct: float | None
    values_pct: list[float]


@dataclass(frozen=True)
class UnstablePrompt:
    """A prompt whose verdict changed between unseeded runs, with the instructions responsible."""

    key: int
    instructions: list[str]
    readings: list[str]


@dataclass(frozen=True)
class BandMetric:
    """A metric's letter band, as fractions."""

    low: float
    high: float


@dataclass(frozen=True)
class Band:
    """The scorer's letter band (`ifeval_scorer.letter_band`), kept as the scorer writes it."""

    TRANSPARENT: ClassVar[bool] = True
    data: dict[str, Any]

    @property
    def metrics(self) -> dict[str, BandMetric]:
        """Metric -> its band ({} when the scorer gave none)."""
        found = self.data.get("metrics") or {}
        return {m: BandMetric(v["low"], v["high"]) for m, v in found.items()}

    @property
    def ambiguous_keys(self) -> list[int]:
        """The prompts that draw a random letter."""
        return list(self.data.get("ambiguous_keys") or [])


@dataclass(frozen=True)
class Traced:
    """An instruction of a prompt whose verdict a sanity check traces, with the readings."""

    key: int
    instruction_id: str
    readings: list[str]


@dataclass(frozen=True)
class SanityCheck:
    """One scorer-sanity check: how many answers, and every metric on them in percent."""

    n: int
    metrics_pct: dict[str, float]


@dataclass(frozen=True)
class EchoCheck(SanityCheck):
    """Prompt echoes: every instruction pass, traced."""

    passes: list[Traced]


@dataclass(frozen=True)
class CompliantCheck(SanityCheck):
    """Hand-written compliant answers: every instruction that failed, traced."""

    failing: list[Traced]


@dataclass(frozen=True)
class SkippedCheck:
    """A check that did not run, and why."""

    skipped: str


@dataclass(frozen=True)
class ControlHeader:
    """What every section of a control that ran says."""

    kind: str
    arms: list[str]
    description: str
    failures: list[str]


@dataclass(frozen=True)
class SkippedControl:
    """A control that could not run (its arms have no generations yet)."""

    kind: str
    arms: list[str]
    skipped: str
    failures: list[str]
    description: str | None = omittable()
    refused: dict[str, str] | None = omittable()  # its arms the backend refused: arm -> message


@dataclass(frozen=True)
class RerunSection(ControlHeader):
    """rerun_identity: pairwise identity; `all_identical` is the determinism finding."""

    pairs: list[IdentityPair]
    all_identical: bool


@dataclass(frozen=True)
class ContrastSection(ControlHeader):
    """batch_size or backend: per pair, identity and the paired test."""

    pairs: list[ContrastPair]


@dataclass(frozen=True)
class SeedVsBatchSection(ControlHeader):
    """seed_vs_batch: seed pairs against batch pairs, and which source varies the score more."""

    seed_pairs: list[SourcePair]
    batch_pairs: list[SourcePair]
    summary: dict[str, SourceSummary]  # "seed", "batch"
    larger: str | None  # "seed", "batch", "equal"; None when a source has no pairs
    metric: str


@dataclass(frozen=True)
class StabilitySection(ControlHeader):
    """scorer_stability: the unseeded scorer's spread, unstable prompts and the letter band."""

    k: int
    metrics: dict[str, StabilityMetric]
    unstable_prompts: list[UnstablePrompt]
    band: Band


@dataclass(frozen=True)
class SanitySection(ControlHeader):
    """scorer_sanity: empty answers, prompt echoes and compliant answers through the scorer."""

    empty: SanityCheck
    echo: EchoCheck
    compliant: CompliantCheck | SkippedCheck
    passed: bool


#: Any control's section, as analysis.json's `controls` holds it.
ControlSection = (
    RerunSection | ContrastSection | SeedVsBatchSection | StabilitySection | SanitySection | SkippedControl
)


def section_type(data: Any, where: str) -> type:
    """The section class of a control's analysis.json object, chosen by its `kind` (each kind's row in
    `capsule.prereg.control_kinds` names it) or, for a control that could not run, by its `skipped`
    reason; BadInputError naming `where` for an unknown or missing kind."""
    if not isinstance(data, Mapping):
        raise BadInputError(f"{where}: expected a control's object, got {type(data).__name__}")
    if "skipped" in data:
        return SkippedControl
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise BadInputError(f"{where}: a control section names its kind (field 'kind' missing)")
    try:
        section: type = resolve(control_kind(kind).section)
    except BadInputError as error:
        raise BadInputError(f"{where}: {error}") from None
    return section

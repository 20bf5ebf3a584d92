"""The response-length model (`response_lengths.toml` beside this module): how many tokens an arm's
responses are expected to take, from lengths measured (or, where none are committed, assumed and
labelled so) for its model, or its bound where there is no entry.

The expected count per prompt at a budget interpolates the entry's means of min(length, budget);
above its largest budget, the share of rows that ran to that cap (`at_cap`; absent: all of them, an
upper reading) is assumed to run on to the new budget. `longest` gives the steps a static batch
(transformers) is expected to run: until its longest member stops, which is what it costs.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from capsule.errors import BadInputError
from capsule.prereg.plan import Arm, Plan
from capsule.prereg.tables import Section

TABLE = Path(__file__).with_name("response_lengths.toml")
NOT_MEASURED = "no measured response lengths for this model and thinking mode: expected = bound"


@dataclass(frozen=True)
class LengthModel:
    """Mean tokens per prompt at each budget for one model (by name prefix) and thinking mode, and the
    expected steps of a static batch (its longest member) at (budget, batch size) where stated."""

    name: str
    thinking: str
    points: tuple[tuple[int, float], ...]
    at_cap: float
    source: str
    longest: tuple[tuple[int, int, float], ...] = ()

    def batch_steps(self, budget: int, batch: int) -> float | None:
        """Expected decoding steps of a static batch of `batch` rows at `budget`; None if not stated."""
        for at_budget, at_batch, steps in self.longest:
            if (at_budget, at_batch) == (budget, batch):
                return steps
        return None

    def expected(self, budget: int) -> float:
        """Mean generated tokens per prompt at `budget` (never above it)."""
        points = self.points
        if budget <= points[0][0]:
            return budget * points[0][1] / points[0][0]
        for (low, low_mean), (high, high_mean) in zip(points, points[1:], strict=False):
            if budget <= high:
                return low_mean + (high_mean - low_mean) * (budget - low) / (high - low)
        top, top_mean = points[-1]
        return min(float(budget), top_mean + self.at_cap * (budget - top))


def parse_lengths(text: str, file: str) -> tuple[LengthModel, ...]:
    """Every model in `text` (TOML); BadInputError naming `file` and the entry on any fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BadInputError(f"{file}: not valid TOML: {error}") from error
    Section(file, "top level", data).keys(("models",))
    models = []
    for i, raw in enumerate(data["models"]):
        s = Section(file, f"models[{i}]", raw)
        s.keys(("name", "thinking", "points", "source"), ("at_cap", "longest"))
        points = s.data["points"]
        ok = (
            isinstance(points, list)
            and points
            and all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and 0 < p[1] <= p[0]
                for p in points
            )
        )
        if not ok or [p[0] for p in points] != sorted({p[0] for p in points}):
            raise s.fail("'points' must be [[budget, mean tokens <= budget], ...] with budgets increasing")
        longest = s.data.get("longest", [])
        if not isinstance(longest, list) or not all(
            isinstance(e, list) and len(e) == 3 and all(isinstance(v, int) for v in e[:2])
            and 0 < e[2] <= e[0]
            for e in longest
        ):
            raise s.fail("'longest' must be [[budget, batch size, expected steps <= budget], ...]")
        models.append(
            LengthModel(
                s.text("name"),
                s.text("thinking", ("on", "off")),
                tuple((int(b), float(m)) for b, m in points),
                s.number("at_cap", 0.0, 1.0, default=1.0),
                s.text("source"),
                tuple((int(b), int(n), float(steps)) for b, n, steps in longest),
            )
        )
    return tuple(models)


@cache
def length_models() -> tuple[LengthModel, ...]:
    """The committed response-length models, parsed once."""
    return parse_lengths(TABLE.read_text(encoding="utf-8"), str(TABLE))


def length_model(models: tuple[LengthModel, ...], plan: Plan, arm: Arm) -> LengthModel | None:
    """The model whose name starts the plan's model name, for the arm's thinking mode; None if none."""
    for model in models:
        if plan.model.name.startswith(model.name) and model.thinking == arm.thinking:
            return model
    return None

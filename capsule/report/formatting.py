"""How every number in RESULTS.md, README regions and plot labels is written: the one formatting code.

`capsule check-numbers` compares numbers as these functions print them, so a value shown with
other rounding anywhere in a checked region counts as drift. Percentages: two decimals; p-values:
four significant digits; counts: plain integers; missing values: an em dash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capsule.analysis.paired_schema import Bounds

DASH = "—"

#: Short column labels for the metrics a plan may read.
METRIC_LABELS: dict[str, str] = {
    "card_avg_strict": "avg strict",
    "card_avg_loose": "avg loose",
    "prompt_level_strict_acc": "prompt strict",
    "inst_level_strict_acc": "inst strict",
    "prompt_level_loose_acc": "prompt loose",
    "inst_level_loose_acc": "inst loose",
}

#: What each metric means, in words, for the headline.
METRIC_MEANING: dict[str, str] = {
    "prompt_level_strict_acc": "share of prompts whose every instruction is followed, strict reading",
    "inst_level_strict_acc": "share of all instructions followed, strict reading",
    "prompt_level_loose_acc": "share of prompts whose every instruction is followed, loose reading",
    "inst_level_loose_acc": "share of all instructions followed, loose reading",
    "card_avg_strict": "the mean of prompt-level and instruction-level strict accuracy",
    "card_avg_loose": "the mean of prompt-level and instruction-level loose accuracy",
}


def fmt_pct(value: float | None) -> str:
    """A percentage with two decimals, or an em dash when absent."""
    return DASH if value is None else f"{value:.2f}"


def fmt_share(value: float | None) -> str:
    """A percentage with two decimals and a percent sign (shares of prompts), or an em dash."""
    return DASH if value is None else f"{value:.2f}%"


def fmt_interval(interval: Bounds | None) -> str:
    """`[low, high]` in percent, or an em dash."""
    if interval is None:
        return DASH
    return f"[{fmt_pct(interval.low_pct)}, {fmt_pct(interval.high_pct)}]"


def fmt_p(value: float | None) -> str:
    """A p-value with four significant digits."""
    return DASH if value is None else f"{value:.4g}"


def fmt_count(passed: int, total: int) -> str:
    """`passed/total`."""
    return f"{passed}/{total}"


def fmt_num(value: float | int | None, decimals: int = 2) -> str:
    """A statistic such as a median: an integer when whole, else `decimals` decimals; dash when absent."""
    if value is None:
        return DASH
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{decimals}f}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 prompt`, `2 prompts` (`nouns` for an irregular plural)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def in_metric_order(metrics: Mapping[str, Any]) -> list[str]:
    """The keys of `metrics` in the order of `METRIC_LABELS` (then any others, sorted)."""
    known = [m for m in METRIC_LABELS if m in metrics]
    return known + sorted(set(metrics) - set(known))

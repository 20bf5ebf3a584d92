"""The embedded default plan: the one `capsule reproduce`, `capsule doctor` and `make reproduce` run
when no plan is named. It is stated once, in `default_plan.txt` beside this module (one line, a path
relative to the repository root), which the Makefile reads too."""

from __future__ import annotations

from functools import cache
from pathlib import Path

DEFAULT_PLAN_FILE = Path(__file__).with_name("default_plan.txt")


@cache
def default_plan() -> Path:
    """The default plan's directory, read from `default_plan.txt` (once per process)."""
    return Path(DEFAULT_PLAN_FILE.read_text(encoding="utf-8").strip())

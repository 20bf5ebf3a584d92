"""A finished run: signed, analysed, every arm's generations complete; what compare and import read.

Checked before anything is compared or appended, so an interrupted or truncated run is refused with
one line (BadInputError, exit 2) naming what is missing, rather than compared on half its prompts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from capsule.run_dir import RunDir

COMPLETE = "complete"  # an arm's generations meta status once every key is generated


def read_bundle(run_dir: Path) -> dict[str, Any]:
    """The run's bundle.json as a dict, or {} when it is missing or unreadable (verification says why)."""
    path = RunDir(run_dir).bundle
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read_analysis(run_dir: Path) -> dict[str, Any]:
    """The run's analysis.json (BadInputError when missing or not an analysis)."""
    path = RunDir(run_dir).analysis
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise BadInputError(f"{path}: not readable JSON ({error}); is the run complete?") from error
    if not isinstance(value, dict) or not isinstance(value.get("arms"), dict) or "verdict_rule" not in value:
        raise BadInputError(f"{path}: not a capsule analysis (no arms or verdict_rule)")
    return value


def check_complete(run_dir: Path) -> list[str]:
    """The run's arm names, once the run is complete: signed, analysed, every arm's generations
    complete (BadInputError naming what is missing otherwise)."""
    run = RunDir(run_dir)
    for path, what in ((run.envelope, "no signed bundle"), (run.analysis, "no analysis.json")):
        if not path.is_file():
            raise BadInputError(
                f"{run_dir}: run is incomplete ({what}); finish it with `capsule reproduce` first"
            )
    arms = list(read_analysis(run_dir)["arms"])
    for arm in arms:
        meta_path = run.generations_meta(arm)
        try:
            status = json.loads(meta_path.read_text(encoding="utf-8")).get("status")
        except (OSError, ValueError):
            status = None
        if status != COMPLETE:
            raise BadInputError(
                f"{meta_path}: arm {arm} is {status or 'missing'}, not complete; the run is "
                "incomplete (finish it with `capsule reproduce`)"
            )
    return arms

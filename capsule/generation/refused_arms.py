"""The record of a refused arm, `generations/<arm>.refused.json` (`RunDir.refusal`): written when
its backend refuses the arm's settings at load time, read by the generate stage (a resumed run does
not retry it unless asked) and by the analysis (every control, comparison and verdict that needs the
arm says "not run: refused (...)")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from capsule.atomic import write_json_atomic
from capsule.generation.refusals import BackendRefusedError
from capsule.generation.store import arm_dict, now_iso
from capsule.jsonio import read_json_object
from capsule.prereg.plan import Arm
from capsule.run_dir import RunDir

REFUSAL_VERSION = 1


def record_refusal(
    run: RunDir, arm: Arm, error: BackendRefusedError, plan_hash: str, manifest_digest: str
) -> dict[str, Any]:
    """Write the arm's refusal record (replacing an earlier one: a retry's answer is the newer one)."""
    record = {
        "refusal_version": REFUSAL_VERSION,
        "status": "refused",
        "arm": arm_dict(arm),
        "backend": error.backend,
        "message": error.message,
        "why": error.why,
        "plan_hash": plan_hash,
        "manifest_digest": manifest_digest,
        "refused_at": now_iso(),
    }
    run.generations_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run.refusal(arm.name), record)
    return record


def refusal_message(run: RunDir, arm: str) -> str | None:
    """The engine's message recorded for a refused arm (None: the arm was not refused)."""
    path = run.refusal(arm)
    if not path.exists():
        return None
    return str(read_json_object(path, "refusal record").get("message", ""))


def refused_arms(run: RunDir, arms: Iterable[str]) -> dict[str, str]:
    """Arm name -> the engine's message, for each of `arms` the run records as refused."""
    found = {}
    for arm in arms:
        message = refusal_message(run, arm)
        if message is not None:
            found[arm] = message
    return found


def not_run_text(refused: Mapping[str, str]) -> str:
    """The words every section that needs a refused arm uses: arm -> the engine's message."""
    return "not run: refused (" + "; ".join(f"{arm}: {message}" for arm, message in refused.items()) + ")"

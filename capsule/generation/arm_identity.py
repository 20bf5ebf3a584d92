"""What determines an arm's rows (`arm_identity`), recorded in its sidecar and checked on every resume,
and the plain-data form of an arm and of a moment that the arm's records share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from capsule.generation.batching import Batch
from capsule.hashing import sha256_json
from capsule.prereg.plan import Arm, arm_record

# Arm fields that do not change rows: caps may be raised to continue a partial arm.
_BOOKKEEPING = ("description", "max_prompts", "max_wall_minutes")


def now_iso() -> str:
    """UTC time, ISO 8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def arm_dict(arm: Arm) -> dict[str, Any]:
    """The arm as plain JSON-able data (`capsule.prereg.plan.arm_record`)."""
    return arm_record(arm)


def arm_identity(
    arm: Arm, batches: list[Batch], input_hashes: dict[int, str], extra: dict[str, Any]
) -> dict[str, Any]:
    """Everything that determines this arm's rows; a resumed run must reproduce it exactly."""
    settings = {k: v for k, v in arm_dict(arm).items() if k not in _BOOKKEEPING}
    return {
        "settings": settings,
        "batches_sha256": sha256_json([list(b.keys) for b in batches]),
        "inputs_sha256": sha256_json({str(k): v for k, v in sorted(input_hashes.items())}),
        "n_keys": sum(len(b.keys) for b in batches),
        "n_batches": len(batches),
        **extra,
    }

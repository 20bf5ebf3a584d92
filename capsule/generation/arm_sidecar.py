"""What an arm's sidecar (`generations/<arm>.meta.json`) says, read in one place: its status (is the
arm complete?), the identity of its rows (everything that determines them), and where each segment
ran (`Placement`). `capsule.generation.store.ArmStore` writes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeGuard

from capsule.errors import CapsuleError
from capsule.generation.batching import Batch
from capsule.hashing import sha256_json
from capsule.jsonio import read_json_object
from capsule.prereg.engine_sharing import Shard
from capsule.prereg.plan import Arm
from capsule.run_dir import RunDir

META_VERSION = 1
COMPLETE: Final = "complete"  # a sidecar's status once every key of the arm is generated
PARTIAL: Final = "partial"  # after a segment that stopped short (a cap, a failure, a signal)
# Arm fields that do not change rows: caps may be raised to continue a partial arm.
_BOOKKEEPING = ("description", "max_prompts", "max_wall_minutes")


@dataclass(frozen=True)
class Placement:
    """Where one segment of an arm runs: its lane (1-based), the device the lane sees, and the
    lane's batch share of the arm (None: all of it)."""

    lane: int
    device: str
    shard: Shard | None = None

    def fields(self) -> dict[str, Any]:
        """What the segment (and the sidecar, for its newest segment) records of it."""
        where: dict[str, Any] = {"lane": self.lane, "device": self.device}
        if self.shard is not None:
            where["batch_share"] = {"shares": [i + 1 for i in self.shard.indices], "of": self.shard.count}
        return where


def is_int(value: Any) -> TypeGuard[int]:
    """Whether a JSON value is an integer (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def read_sidecar(path: Path) -> dict[str, Any]:
    """An arm's sidecar, read (BadInputError when it is not a JSON object): its one reader."""
    return read_json_object(path, "generations sidecar")


def recorded_status(run: RunDir, arm_name: str) -> str | None:
    """The status an arm's sidecar records ("running", "partial", "complete"); None when there is no
    sidecar or it cannot be read (opening the arm's store says why)."""
    path = run.generations_meta(arm_name)
    try:
        status = read_sidecar(path).get("status") if path.is_file() else None
    except (OSError, CapsuleError):
        return None
    return status if isinstance(status, str) else None


def arm_done(run: RunDir, arm_name: str) -> bool:
    """Whether an arm's sidecar says it is complete (then nothing is left to generate, and no
    backend need be loaded for it)."""
    return recorded_status(run, arm_name) == COMPLETE


def now_iso() -> str:
    """UTC time, ISO 8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def arm_dict(arm: Arm) -> dict[str, Any]:
    """The arm as plain JSON-able data."""
    return dataclasses.asdict(arm)


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

"""What an arm's sidecar (`generations/<arm>.meta.json`) says, read in one place: its status (is the
arm complete?), the identity of its rows (everything that determines them), and where each segment
ran (`Placement`). `capsule.generation.store.ArmStore` writes it.

Every other module reads a sidecar as one frozen `ArmSidecar` (`parse_sidecar`, `load_sidecar`):
each field a reader relies on is required and typed (its manifest digest and each segment's, the
status, the backend the arm declared and the one that ran it, where each segment ran: lane,
device, batch share, batches), and a field of the wrong type is one error naming it. What a sidecar
must also agree with (this run's machine) is `capsule.evidence.arm_records`'s to check.
A sidecar of samples imported from another harness (`capsule import-samples`) has no segments and
parses with `imported` set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeGuard

from capsule.errors import BadInputError, CapsuleError
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
        return load_sidecar(path).status if path.is_file() else None
    except (OSError, CapsuleError):
        return None


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


@dataclass(frozen=True)
class BatchShare:
    """A lane's share of an arm's batches: shares (1-based) of `of`."""

    shares: tuple[int, ...]
    of: int


@dataclass(frozen=True)
class Where:
    """What one segment (or the sidecar, for its newest) records of the machine and place it ran:
    the manifest digest, and where the run had lanes: lane, device, batch share and batches."""

    manifest_digest: str
    lane: int | None = None
    device: str | None = None
    backend_device: str | None = None  # the device the backend's describe() reported
    batch_share: BatchShare | None = None
    batches: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ArmSidecar:
    """An arm's sidecar as read: status, the backend the arm declared (`arm.backend`) and the one
    that described itself (`backend.backend`), the elapsed seconds over all segments, and where it
    ran (`top`: the sidecar's own fields, then each segment)."""

    status: str
    declared_backend: str | None
    ran_backend: str | None
    elapsed_s: float
    top: Where | None  # None only for imported samples
    segments: tuple[Where, ...]
    imported: bool = False


class SidecarError(BadInputError):
    """A sidecar missing a field a reader relies on, or holding one of the wrong type."""


def _where(data: Mapping[str, Any], label: str) -> Where:
    """A segment's (or the sidecar's) record of where it ran; SidecarError naming the field."""
    digest = data.get("manifest_digest")
    if not isinstance(digest, str):
        raise SidecarError(f"{label}field 'manifest_digest' is missing or not a string")
    lane = data.get("lane")
    if lane is not None and (not is_int(lane) or lane < 1):
        raise SidecarError(f"{label}lane {lane!r} is not a lane number (an integer from 1)")
    device = data.get("device")
    backend = data.get("backend")
    backend_device = backend.get("device") if isinstance(backend, dict) else None
    for named in (device, backend_device):
        if named is not None and not isinstance(named, str):
            raise SidecarError(f"{label}device {named!r} is not a string")
    return Where(digest, lane, device, backend_device, _share(data.get("batch_share"), label),
                 _batches(data.get("batches"), label))


def _share(share: Any, label: str) -> BatchShare | None:
    if share is None:
        return None
    shares, of = (share.get("shares"), share.get("of")) if isinstance(share, dict) else (None, None)
    if is_int(of) and isinstance(shares, list) and shares and all(is_int(s) and 1 <= s <= of for s in shares):
        return BatchShare(tuple(shares), of)
    raise SidecarError(f"{label}batch_share {share!r} is not {{'shares': [1..of], 'of': n}}")


def _batches(batches: Any, label: str) -> tuple[int, ...] | None:
    if batches is None:
        return None
    if not (isinstance(batches, list) and all(is_int(b) and b >= 0 for b in batches)):
        raise SidecarError(f"{label}batches {batches!r} is not a list of batch indices")
    return tuple(batches)


def _name(part: Any, key: str) -> str | None:
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, str) else None


def parse_sidecar(data: Any) -> ArmSidecar:
    """A sidecar's JSON value as an ArmSidecar; SidecarError saying what is missing or mistyped (the
    caller names the file)."""
    if not isinstance(data, dict):
        raise SidecarError("it is not a JSON object")
    status = data.get("status")
    if not isinstance(status, str):
        raise SidecarError("field 'status' is missing or not a string")
    if "imported" in data:
        return ArmSidecar(status, None, None, 0.0, None, (), imported=True)
    elapsed = data.get("elapsed_s", 0.0)
    if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)):
        raise SidecarError(f"field 'elapsed_s' {elapsed!r} is not a number of seconds")
    top = _where(data, "the sidecar: ")
    segments = data.get("segments")
    if not isinstance(segments, list) or not segments or not all(isinstance(s, dict) for s in segments):
        raise SidecarError("field 'segments' is missing or not a list of segments")
    placed = tuple(_where(segment, f"segment {i}: ") for i, segment in enumerate(segments, start=1))
    return ArmSidecar(status, _name(data.get("arm"), "backend"), _name(data.get("backend"), "backend"),
                      float(elapsed), top, placed)


def load_sidecar(path: Path) -> ArmSidecar:
    """An arm's sidecar file, parsed (SidecarError naming the file and the field)."""
    try:
        return parse_sidecar(read_sidecar(path))
    except SidecarError as error:
        raise SidecarError(f"{path}: {error}") from None

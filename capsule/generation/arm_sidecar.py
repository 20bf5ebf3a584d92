"""An arm's sidecar (`generations/<arm>.meta.json`) as one frozen type, decoded and encoded here only.

A sidecar is a `Sidecar` (the arm, its identity, its status, one `Segment` per process that
generated it, where each ran) or, for samples imported from another harness (`capsule
import-samples`), an `ImportedSidecar`. `decode` checks every field a reader relies on (a missing or
mistyped one is one `SidecarError` naming it) and `encode` writes back exactly what was read, so a
committed sidecar round-trips byte for byte. `capsule.generation.store.ArmStore` builds new ones;
every other module reads one by attribute. What a sidecar must also agree with (this run's machine)
is `capsule.evidence.arm_records`'s to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeGuard

from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError
from capsule.jsonio import read_json_object

META_VERSION = 1
RUNNING: Final = "running"  # while a segment generates (or after one that died without closing)
COMPLETE: Final = "complete"  # a sidecar's status once every key of the arm is generated
PARTIAL: Final = "partial"  # after a segment that stopped short (a cap, a failure, a signal)


class SidecarError(BadInputError):
    """A sidecar missing a field a reader relies on, or holding one of the wrong type."""


def is_int(value: Any) -> TypeGuard[int]:
    """Whether a JSON value is an integer (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class BatchShare:
    """A lane's share of an arm's batches: shares (1-based) of `of`."""

    shares: tuple[int, ...]
    of: int


@dataclass(frozen=True)
class Segment:
    """One process's run of the arm: when, on which machine (manifest digest), where (lane, Ray node,
    device, batch share, the batches it wrote, where the run had lanes), and once closed how it ended."""

    started_at: str
    manifest_digest: str
    rows: int = 0
    lane: int | None = None
    device: str | None = None
    batch_share: BatchShare | None = None
    batches: tuple[int, ...] | None = None
    node: str | None = None
    ended_at: str | None = None
    elapsed_s: float | None = None
    backend: Mapping[str, Any] | None = None  # the backend's describe() at the segment's end
    stop: str | None = None

    @property
    def backend_device(self) -> str | None:
        """The device the backend's describe() reported."""
        return _device(self.backend)


@dataclass(frozen=True)
class Sidecar:
    """An arm's sidecar: the arm as plain data (caps as last run), the identity of its rows and its
    hash, the plan hash, status, segments, seconds generated over all of them, the newest segment's
    machine and place, and once a segment has closed: reason, end, backend, rows and keys."""

    arm: Mapping[str, Any]
    identity: Mapping[str, Any]
    identity_sha256: str
    plan_hash: str
    started_at: str
    manifest_digest: str
    status: str
    segments: tuple[Segment, ...] = ()
    elapsed_s: float = 0.0
    meta_version: int = META_VERSION
    lane: int | None = None
    device: str | None = None
    reason: str | None = None
    ended_at: str | None = None
    backend: Mapping[str, Any] | None = None
    n_rows: int | None = None
    n_keys: int | None = None

    @property
    def backend_device(self) -> str | None:
        """The device the newest closed segment's backend reported."""
        return _device(self.backend)

    @property
    def declared_backend(self) -> str | None:
        """The backend the arm declared."""
        return _text(self.arm.get("backend"))

    @property
    def ran_backend(self) -> str | None:
        """The backend that described itself when the newest segment closed."""
        return _text(self.backend.get("backend")) if self.backend is not None else None


@dataclass(frozen=True)
class ImportedSidecar:
    """The sidecar of samples imported from another harness: no segments, no backend of ours."""

    arm: str
    status: str
    imported: Mapping[str, Any]  # harness, layout, file, file_sha256, n
    imported_at: str
    meta_version: int = META_VERSION

    elapsed_s = 0.0
    declared_backend = None
    ran_backend = None


AnySidecar = Sidecar | ImportedSidecar


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _device(backend: Mapping[str, Any] | None) -> str | None:
    return None if backend is None else _text(backend.get("device"))


class _Fields:
    """Typed reads of one JSON object's fields, each error naming the field (and `label`'s part)."""

    def __init__(self, data: Mapping[str, Any], label: str) -> None:
        self.data, self.label = data, label

    def fail(self, what: str) -> SidecarError:
        return SidecarError(f"{self.label}{what}")

    def text(self, key: str, optional: bool = False) -> Any:
        if optional and key not in self.data:
            return None
        if not isinstance(self.data.get(key), str):
            raise self.fail(f"field {key!r} is missing or not a string")
        return self.data[key]

    def number(self, key: str, default: float | None = None) -> Any:
        value = self.data.get(key, default)
        if value is None and key not in self.data:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"field {key!r} {value!r} is not a number of seconds")
        return float(value)

    def count(self, key: str, default: int | None = None) -> Any:
        value = self.data.get(key, default)
        if value is None and key not in self.data:
            return None
        if not is_int(value) or value < 0:
            raise self.fail(f"field {key!r} {value!r} is not a count")
        return value

    def obj(self, key: str, optional: bool = False) -> Any:
        if optional and key not in self.data:
            return None
        if not isinstance(self.data.get(key), dict):
            raise self.fail(f"field {key!r} is missing or not an object")
        return self.data[key]

    def lane(self) -> int | None:
        lane = self.data.get("lane")
        if lane is not None and (not is_int(lane) or lane < 1):
            raise self.fail(f"lane {lane!r} is not a lane number (an integer from 1)")
        return lane

    def device(self) -> str | None:
        device = self.data.get("device")
        backend = self.data.get("backend")
        for named in (device, backend.get("device") if isinstance(backend, dict) else None):
            if named is not None and not isinstance(named, str):
                raise self.fail(f"device {named!r} is not a string")
        return device


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


def _segment(data: Mapping[str, Any], label: str) -> Segment:
    fields = _Fields(data, label)
    digest = fields.text("manifest_digest")
    return Segment(
        started_at=fields.text("started_at"), manifest_digest=digest, rows=fields.count("rows", 0),
        lane=fields.lane(), device=fields.device(), batch_share=_share(data.get("batch_share"), label),
        batches=_batches(data.get("batches"), label), ended_at=fields.text("ended_at", optional=True),
        elapsed_s=fields.number("elapsed_s"), backend=fields.obj("backend", optional=True),
        stop=fields.text("stop", optional=True), node=fields.text("node", optional=True),
    )


def decode(data: Any) -> AnySidecar:
    """A sidecar's JSON value as its type; SidecarError saying what is missing or mistyped (the
    caller names the file)."""
    if not isinstance(data, dict):
        raise SidecarError("it is not a JSON object")
    fields = _Fields(data, "")
    status = fields.text("status")
    if "imported" in data:
        return ImportedSidecar(fields.text("arm"), status, fields.obj("imported"), fields.text("imported_at"),
                               fields.count("meta_version", META_VERSION))
    top = _Fields(data, "the sidecar: ")
    digest = top.text("manifest_digest")
    segments = data.get("segments")
    if not isinstance(segments, list) or not segments or not all(isinstance(s, dict) for s in segments):
        raise SidecarError("field 'segments' is missing or not a list of segments")
    return Sidecar(
        arm=fields.obj("arm"), identity=fields.obj("identity"),
        identity_sha256=fields.text("identity_sha256"),
        plan_hash=fields.text("plan_hash"), started_at=fields.text("started_at"), manifest_digest=digest,
        status=status,
        segments=tuple(_segment(s, f"segment {i}: ") for i, s in enumerate(segments, start=1)),
        elapsed_s=fields.number("elapsed_s", 0.0), meta_version=fields.count("meta_version", META_VERSION),
        lane=top.lane(), device=top.device(), reason=fields.text("reason", optional=True),
        ended_at=fields.text("ended_at", optional=True), backend=fields.obj("backend", optional=True),
        n_rows=fields.count("n_rows"), n_keys=fields.count("n_keys"),
    )


def _present(pairs: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in pairs.items() if value is not None}


def _encode_segment(segment: Segment) -> dict[str, Any]:
    share = segment.batch_share
    return _present({
        "started_at": segment.started_at, "manifest_digest": segment.manifest_digest, "rows": segment.rows,
        "lane": segment.lane, "device": segment.device,
        "batch_share": None if share is None else {"shares": list(share.shares), "of": share.of},
        "batches": None if segment.batches is None else list(segment.batches),
        "ended_at": segment.ended_at, "elapsed_s": segment.elapsed_s,
        "backend": None if segment.backend is None else dict(segment.backend), "stop": segment.stop,
        "node": segment.node,
    })


def encode(sidecar: AnySidecar) -> dict[str, Any]:
    """The sidecar as the JSON object its file holds (fields never set are left out)."""
    if isinstance(sidecar, ImportedSidecar):
        return {"meta_version": sidecar.meta_version, "arm": sidecar.arm, "status": sidecar.status,
                "imported": dict(sidecar.imported), "imported_at": sidecar.imported_at}
    return _present({
        "meta_version": sidecar.meta_version, "arm": dict(sidecar.arm), "identity": dict(sidecar.identity),
        "identity_sha256": sidecar.identity_sha256, "plan_hash": sidecar.plan_hash,
        "started_at": sidecar.started_at, "segments": [_encode_segment(s) for s in sidecar.segments],
        "elapsed_s": sidecar.elapsed_s, "manifest_digest": sidecar.manifest_digest, "status": sidecar.status,
        "lane": sidecar.lane, "device": sidecar.device, "reason": sidecar.reason,
        "ended_at": sidecar.ended_at,
        "backend": None if sidecar.backend is None else dict(sidecar.backend),
        "n_rows": sidecar.n_rows, "n_keys": sidecar.n_keys,
    })


def load_sidecar(path: Path) -> AnySidecar:
    """An arm's sidecar file, decoded (SidecarError naming the file and the field; BadInputError
    when it is not JSON): its one reader."""
    try:
        return decode(read_json_object(path, "generations sidecar"))
    except SidecarError as error:
        raise SidecarError(f"{path}: {error}") from None


def write_sidecar(path: Path, sidecar: AnySidecar) -> None:
    """Write an arm's sidecar atomically: its one writer."""
    write_json_atomic(path, encode(sidecar))

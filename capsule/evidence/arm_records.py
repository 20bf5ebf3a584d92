"""`capsule verify`'s check of the per-arm records a signed run holds: every arm sidecar and every
refusal record, read whole (their bytes were already checked against the bundle).

A sidecar (`generations/<arm>.meta.json`) must hold, typed, every field verify relies on: its
`manifest_digest` and each segment's (this run's machine: an arm generated elsewhere and copied in
before signing is refused; a field removed is refused as a field changed is), and, where a segment
or the sidecar records where it ran, a lane (an integer from 1), a device this machine has (`cpu`,
or `cuda[:N]` with N below the manifest's GPU count), a batch share (`{"shares": [...], "of": n}`)
and the batches it wrote (integers). A refusal record must be this run's refusal of its arm
(`capsule.generation.refused_arms.refusal_problem`: typed, one of its backend's declared refusals
applying to the arm's settings, this run's id, plan and machine, its start-up log beside it with the
recorded digest, no rows or sidecar of the arm beside it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from capsule.errors import VerificationError
from capsule.evidence.bundle_index import FileRecord
from capsule.generation.refused_arms import RunFacts, parse_refusal, refusal_problem
from capsule.jsonio import parse_json
from capsule.run_dir import GENERATIONS, META_SUFFIX, REFUSED_LOG_SUFFIX, REFUSED_SUFFIX, ROWS_SUFFIX

_CUDA = re.compile(r"cuda(?::(\d+))?")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def device_problem(device: Any, gpu_count: int | None) -> str | None:
    """Why `device` is not one this machine has (None: it is): `cpu`, or `cuda[:N]`, N < gpu_count
    (None: the run has no manifest to say, and only the type is checked)."""
    if not isinstance(device, str):
        return f"device {device!r} is not a string"
    if device == "cpu" or gpu_count is None:
        return None
    match = _CUDA.fullmatch(device)
    index = int(match.group(1) or 0) if match else None
    if index is None or index >= gpu_count:
        return f"device {device!r} is not one of this run's machine ({gpu_count} GPU(s) in its manifest)"
    return None


def _placement_problem(where: Mapping[str, Any], gpu_count: int | None) -> str | None:
    """What is wrong with a segment's (or the sidecar's) record of where it ran, if anything."""
    if "lane" in where and (not _is_int(where["lane"]) or where["lane"] < 1):
        return f"lane {where['lane']!r} is not a lane number (an integer from 1)"
    for device in [where.get("device")] + [
        where["backend"].get("device") if isinstance(where.get("backend"), dict) else None
    ]:
        if device is not None and (problem := device_problem(device, gpu_count)):
            return problem
    share = where.get("batch_share")
    if share is not None:
        shares, of = (share.get("shares"), share.get("of")) if isinstance(share, dict) else (None, None)
        if not (_is_int(of) and isinstance(shares, list) and shares
                and all(_is_int(s) and 1 <= s <= of for s in shares)):
            return f"batch_share {share!r} is not {{'shares': [1..of], 'of': n}}"
    batches = where.get("batches")
    indices = isinstance(batches, list) and all(_is_int(b) and b >= 0 for b in batches)
    if batches is not None and not indices:
        return f"batches {batches!r} is not a list of batch indices"
    return None


def sidecar_problem(sidecar: Any, manifest_digest: str, gpu_count: int | None) -> str | None:
    """Why an arm sidecar is not whole and this run's (None: it is)."""
    if not isinstance(sidecar, dict):
        return "it is not a JSON object"
    digest = sidecar.get("manifest_digest")
    if not isinstance(digest, str):
        return "field 'manifest_digest' is missing or not a string"
    segments = sidecar.get("segments")
    if not isinstance(segments, list) or not segments or not all(isinstance(s, dict) for s in segments):
        return "field 'segments' is missing or not a list of segments"
    for index, segment in enumerate([sidecar, *segments]):
        label = "the sidecar" if index == 0 else f"segment {index}"
        named = segment.get("manifest_digest")
        if not isinstance(named, str):
            return f"{label}: field 'manifest_digest' is missing or not a string"
        if named != manifest_digest:
            return (
                f"generated on machine fingerprint {named}, not this run's {manifest_digest} ({label}: an "
                "arm from another run or machine was put in this run)"
            )
        if problem := _placement_problem(segment, gpu_count):
            return f"{label}: {problem}"
    return None


def check_arm_records(
    run_dir: Path, listed: tuple[FileRecord, ...], facts: RunFacts, gpu_count: int | None
) -> None:
    """Every sidecar and refusal record of the run's bundle file list, read whole (module doc);
    VerificationError naming the file and what is wrong."""
    names = {item.path for item in listed}
    for path in sorted(names):
        if not path.startswith(f"{GENERATIONS}/"):
            continue
        data = (run_dir / path).read_bytes
        if path.endswith(META_SUFFIX):
            sidecar = parse_json(data(), path, error=VerificationError)
            problem = sidecar_problem(sidecar, facts.manifest_digest, gpu_count)
            if problem is not None:
                raise VerificationError(f"{path}: {problem}")
        elif path.endswith(REFUSED_SUFFIX):
            stem = path[: -len(REFUSED_SUFFIX)]
            parsed = parse_json(data(), path, error=VerificationError)
            if not isinstance(parsed, dict):
                raise VerificationError(f"{path}: a refusal record is a JSON object")
            record = parse_refusal(parsed, path, VerificationError)
            log_name = stem + REFUSED_LOG_SUFFIX
            log = (run_dir / log_name).read_bytes() if log_name in names else None
            beside = stem + ROWS_SUFFIX in names or stem + META_SUFFIX in names
            problem = refusal_problem(record, Path(stem).name, facts, log=log, beside_rows=beside)
            if problem is not None:
                raise VerificationError(f"{path}: not this run's refusal of its arm ({problem})")

"""`capsule verify`'s check of the per-arm records a signed run holds: every arm sidecar and every
refusal record, read whole (their bytes were already checked against the bundle).

A sidecar (`generations/<arm>.meta.json`) is decoded whole (`capsule.generation.arm_sidecar`: every
field verify relies on required and typed; a field removed is refused as a field changed is), and
must be this run's: its `manifest_digest` and each segment's this run's machine, or another Ray
node's whose manifest the run holds (an arm generated elsewhere and copied in before signing is
refused), each device it names one that machine has
(`cpu`, or `cuda[:N]` with N below the manifest's GPU count). A refusal record must be this run's
refusal of its arm (`capsule.generation.refused_arms.refusal_problem`: typed, one of its backend's
declared refusals applying to the arm's settings, this run's id, plan and machine, its start-up log
beside it with the recorded digest, no rows or sidecar of the arm beside it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from capsule.errors import VerificationError
from capsule.evidence.bundle_index import FileRecord
from capsule.generation.arm_sidecar import AnySidecar, ImportedSidecar, Segment, Sidecar, SidecarError, decode
from capsule.generation.refused_arms import RunFacts, parse_refusal, refusal_problem
from capsule.jsonio import parse_json
from capsule.run_dir import GENERATIONS, META_SUFFIX, REFUSED_LOG_SUFFIX, REFUSED_SUFFIX, ROWS_SUFFIX

_CUDA = re.compile(r"cuda(?::(\d+))?")


def device_problem(device: str, gpu_count: int | None) -> str | None:
    """Why `device` is not one this machine has (None: it is): `cpu`, or `cuda[:N]`, N < gpu_count
    (None: the run has no manifest to say, and only the type is checked)."""
    if device == "cpu" or gpu_count is None:
        return None
    match = _CUDA.fullmatch(device)
    index = int(match.group(1) or 0) if match else None
    if index is None or index >= gpu_count:
        return f"device {device!r} is not one of this run's machine ({gpu_count} GPU(s) in its manifest)"
    return None


def sidecar_problem(sidecar: AnySidecar, machines: Mapping[str, int | None]) -> str | None:
    """Why a decoded arm sidecar is not this run's (None: it is): every segment made on a machine
    the run holds the manifest of (`machines`: digest -> its GPU count, None where unknown; the
    run's own first), on devices that machine has."""
    if isinstance(sidecar, ImportedSidecar):
        return "field 'segments' is missing: imported samples are not a generated arm"
    places: list[Sidecar | Segment] = [sidecar, *sidecar.segments]
    own = next(iter(machines))
    for index, where in enumerate(places):
        label = "the sidecar" if index == 0 else f"segment {index}"
        if where.manifest_digest not in machines:
            nodes = len(machines) - 1
            held = f"this run's {own}" + (f" or one of its {nodes} node manifest(s)" if nodes else "")
            return (
                f"generated on machine fingerprint {where.manifest_digest}, not {held} "
                f"({label}: an arm from another run or machine was put in this run)"
            )
        for device in (where.device, where.backend_device):
            if device is not None and (problem := device_problem(device, machines[where.manifest_digest])):
                return f"{label}: {problem}"
    return None


def check_arm_records(
    run_dir: Path, listed: tuple[FileRecord, ...], facts: RunFacts, machines: Mapping[str, int | None]
) -> None:
    """Every sidecar and refusal record of the run's bundle file list, read whole (module doc);
    VerificationError naming the file and what is wrong."""
    names = {item.path for item in listed}
    for path in sorted(names):
        if not path.startswith(f"{GENERATIONS}/"):
            continue
        data = (run_dir / path).read_bytes
        if path.endswith(META_SUFFIX):
            try:
                sidecar = decode(parse_json(data(), path, error=VerificationError))
            except SidecarError as error:
                raise VerificationError(f"{path}: {error}") from None
            problem = sidecar_problem(sidecar, machines)
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

"""The record of a refused arm, `generations/<arm>.refused.json` (`RunDir.refusal`), and its evidence,
`generations/<arm>.refused.log` (`RunDir.refusal_log`): written when the arm's backend refuses its
settings at load time, read back typed (`RefusalRecord`, parsed here alone) by the generate stage (a
resumed run does not retry it unless asked), by the analysis (every control, comparison and verdict
that needs the arm says "not run: refused (...)") and by `capsule verify`.

A refusal is evidence like a row, so a record is a result only when it is whole and is this run's
answer for this arm (`refusal_problem`): every field present and typed; the backend, the exception
class and the pattern one of that backend's declared refusals (`BackendSpec.refusals`), applying to
the recorded arm's settings (`Refusal.applies_to`), the message matching the pattern; the arm hash,
plan hash, run id and machine fingerprint this run's; the start-up log beside it with the recorded
digest; and no rows or sidecar of the same arm beside it. A record failing any of these is refused
(by the resume: one `Error:` line, never skipped; by verify: exit 3), not read as a result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from capsule.atomic import write_bytes_atomic, write_json_atomic
from capsule.errors import BadInputError, CapsuleError
from capsule.generation.arm_identity import arm_dict, now_iso
from capsule.generation.refusals import BackendRefusedError
from capsule.hashing import sha256_bytes, sha256_json
from capsule.jsonio import read_json_object
from capsule.machine.software import PACKAGES, installed_version
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.plan import Arm
from capsule.run_dir import RunDir

REFUSAL_VERSION = 2  # 1: three loose fields and no evidence (refused as written by an older capsule)
_SETTINGS_IGNORED = ("description", "max_prompts", "max_wall_minutes")  # caps a resume may raise


@dataclass(frozen=True)
class RefusalRecord:
    """One refused arm: what was asked, who refused it with which declared refusal, and the evidence."""

    arm: Mapping[str, Any]  # the arm as run, plain data (`arm_dict`)
    arm_sha256: str  # sha256_json(arm)
    plan_hash: str
    run_id: str
    backend: str
    engines: Mapping[str, str]  # the backend's packages -> installed version ("not installed")
    exception: str  # the declared refusal's exception class name
    pattern: str  # the declared refusal's pattern, as declared
    message: str  # the engine's own line that matched it
    why: str
    manifest_digest: str
    log_sha256: str  # of `generations/<arm>.refused.log`
    refused_at: str

    def to_json(self) -> dict[str, Any]:
        """The record as written: its version and status first, then every field."""
        return {"refusal_version": REFUSAL_VERSION, "status": "refused", **asdict(self)}


_TEXT_FIELDS = (
    "arm_sha256", "plan_hash", "run_id", "backend", "exception", "pattern", "message", "why",
    "manifest_digest", "log_sha256", "refused_at",
)


def parse_refusal(
    data: Mapping[str, Any], where: str, error: type[CapsuleError] = BadInputError
) -> RefusalRecord:
    """A refusal record's JSON as a `RefusalRecord`, or `error` naming the field that is missing or
    has the wrong type (a version-1 record is named as written by an older capsule)."""
    version = data.get("refusal_version")
    if version != REFUSAL_VERSION:
        old = " (written by an older capsule: it holds no evidence)" if version == 1 else ""
        raise error(
            f"{where}: refusal_version {version!r}, expected {REFUSAL_VERSION}{old}; remove it, or rerun "
            "with --retry-refused to ask the backend again"
        )
    if data.get("status") != "refused":
        raise error(f"{where}: field 'status' is {data.get('status')!r}, expected 'refused'")
    for name in _TEXT_FIELDS:
        if not isinstance(data.get(name), str):
            raise error(f"{where}: field {name!r} is missing or not a string")
    arm, engines = data.get("arm"), data.get("engines")
    if not isinstance(arm, dict) or not isinstance(arm.get("name"), str):
        raise error(f"{where}: field 'arm' is missing or not an arm's settings")
    if not isinstance(engines, dict) or not all(isinstance(v, str) for v in engines.values()):
        raise error(f"{where}: field 'engines' is missing or not package -> version")
    return RefusalRecord(arm=arm, engines=engines, **{name: data[name] for name in _TEXT_FIELDS})


def read_refusal(run: RunDir, arm: str, error: type[CapsuleError] = BadInputError) -> RefusalRecord | None:
    """The arm's refusal record, parsed (None: the arm was not refused)."""
    path = run.refusal(arm)
    if not path.exists():
        return None
    return parse_refusal(read_json_object(path, "refusal record"), str(path), error)


def _engines(backend: str) -> dict[str, str]:
    spec = SPECS[backend]
    return {
        package: (installed_version(*PACKAGES.get(package, (package,))) or {}).get("version", "not installed")
        for package in spec.requires
    }


def record_refusal(
    run: RunDir, arm: Arm, error: BackendRefusedError, *, plan_hash: str, run_id: str, manifest_digest: str
) -> RefusalRecord:
    """Write the arm's refusal record and its evidence (replacing earlier ones: a retry's answer is
    the newer one). The log goes first, so a record never names a log that is not there."""
    if error.refused is None:
        raise ValueError("only a declared refusal (load_backend's BackendRefusedError) is recorded")
    log = error.log.encode("utf-8", "replace")
    settings = arm_dict(arm)
    record = RefusalRecord(
        arm=settings, arm_sha256=sha256_json(settings), plan_hash=plan_hash, run_id=run_id,
        backend=error.backend, engines=_engines(error.backend), exception=error.refused.refusal.exception,
        pattern=error.refused.refusal.pattern, message=error.message, why=error.why,
        manifest_digest=manifest_digest, log_sha256=sha256_bytes(log), refused_at=now_iso(),
    )
    run.generations_dir.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(run.refusal_log(arm.name), log)
    write_json_atomic(run.refusal(arm.name), record.to_json())
    return record


def remove_refusal(run: RunDir, arm: str) -> None:
    """An arm retried and taken: its earlier refusal and evidence go (the rows are the answer now)."""
    run.refusal(arm).unlink(missing_ok=True)
    run.refusal_log(arm).unlink(missing_ok=True)


def _settings(arm: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in arm.items() if key not in _SETTINGS_IGNORED}


@dataclass(frozen=True)
class RunFacts:
    """What a refusal record must name to be this run's: its id, plan and machine (or another
    node's the run holds the manifest of: lanes on a Ray cluster)."""

    run_id: str
    plan_hash: str
    manifest_digest: str
    node_digests: frozenset[str] = frozenset()


def refusal_problem(
    record: RefusalRecord, arm_name: str, facts: RunFacts, *, log: bytes | None, beside_rows: bool,
    arm: Arm | None = None,
) -> str | None:
    """Why `record` is not this run's refusal of arm `arm_name` (None: it is). `log`: the bytes of
    the evidence file (None: absent). `beside_rows`: the arm has rows or a sidecar in the run.
    `arm`: the arm the run would run now (the resume), whose settings the record must hold."""
    spec = SPECS.get(record.backend)
    declared = [] if spec is None else [
        r for r in spec.refusals if (r.exception, r.pattern) == (record.exception, record.pattern)
    ]
    checks: list[tuple[bool, str]] = [
        (not beside_rows, "the same arm has rows or a sidecar beside it"),
        (record.arm.get("name") == arm_name, f"it names arm {record.arm.get('name')!r}"),
        (record.arm_sha256 == sha256_json(record.arm), "its arm_sha256 is not the digest of its arm"),
        (record.arm.get("backend") == record.backend, f"its arm runs on {record.arm.get('backend')!r}, "
         f"the record says backend {record.backend!r} refused it"),
        (arm is None or _settings(record.arm) == _settings(arm_dict(arm)),
         "it records other settings than the plan's arm"),
        (bool(declared), f"backend {record.backend!r} declares no refusal {record.exception}: "
         f"{record.pattern!r} (capsule.prereg.backend_specs)"),
        (not declared or declared[0].applies_to(record.arm),
         f"the refusal answers {declared[0].when.describe() if declared and declared[0].when else ''}, "
         "which the arm does not ask for"),
        (not declared or re.search(record.pattern, record.message) is not None,
         "its message does not match the declared pattern"),
        (record.run_id == facts.run_id, f"it was written for run {record.run_id!r}"),
        (record.plan_hash == facts.plan_hash, f"it was written under plan hash {record.plan_hash}"),
        (record.manifest_digest in {facts.manifest_digest, *facts.node_digests},
         f"it was written on machine fingerprint {record.manifest_digest}"),
        (log is not None, "its start-up log (.refused.log) is missing"),
        (log is None or sha256_bytes(log) == record.log_sha256,
         "its start-up log does not have the recorded digest"),
    ]
    return next((why for ok, why in checks if not ok), None)


def check_run_refusal(run: RunDir, arm: Arm, facts: RunFacts) -> RefusalRecord | None:
    """The resume's question: the arm's refusal record when it is this run's answer for the arm
    (None: no record); BadInputError (one line, exit 2) for a record that is not, which is never
    skipped as a result."""
    record = read_refusal(run, arm.name)
    if record is None:
        return None
    log_path = run.refusal_log(arm.name)
    beside = run.generations(arm.name).exists() or run.generations_meta(arm.name).exists()
    problem = refusal_problem(
        record, arm.name, facts, log=log_path.read_bytes() if log_path.is_file() else None,
        beside_rows=beside, arm=arm,
    )
    if problem is not None:
        raise BadInputError(
            f"{run.refusal(arm.name)}: not this run's refusal of arm {arm.name!r} ({problem}); this run "
            "did not write it, so it is no result: remove it, or rerun with --retry-refused"
        )
    return record


def refused_arms(run: RunDir, arms: Iterable[str]) -> dict[str, str]:
    """Arm name -> the engine's message, for each of `arms` the run records as refused."""
    found = {}
    for arm in arms:
        record = read_refusal(run, arm)
        if record is not None:
            found[arm] = record.message
    return found


def not_run_text(refused: Mapping[str, str]) -> str:
    """The words every section that needs a refused arm uses: arm -> the engine's message."""
    return "not run: refused (" + "; ".join(f"{arm}: {message}" for arm, message in refused.items()) + ")"

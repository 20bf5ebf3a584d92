"""Result bundles: digest every file of a run directory, state it in-toto, sign it (DSSE), record it.

A bundle is three files beside the run's own files:

- `bundle.json`: the index, every regular file of the run directory (except these three) with its
  sha256 and size, the run id, the plan's path and hash, the manifest digest, the ledger heads at
  the run's start and at bundling, and the signing key's fingerprint;
- `bundle.dsse.json`: a DSSE envelope over an in-toto Statement v1 whose subjects are those files
  and whose predicate repeats the run's facts and pins `bundle.json` by its sha256;
- `bundle.pub.pem`: the public key, so a bundle verifies offline.

A `bundle` ledger entry then pins the envelope's bytes, which makes every byte of the bundle count.
`capsule.evidence.verify` checks all of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capsule.atomic import write_bytes_atomic, write_json_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.evidence.bundle_index import BundleIndex, FileRecord, LedgerHeads, PlanRef, SignerRef
from capsule.evidence.signing import SigningKey, fingerprint_of, public_key_pem, sign_payload
from capsule.faults import crash_point
from capsule.hashing import canonical_json, sha256_bytes, sha256_file
from capsule.prereg.ledger_entries import BundleEntry
from capsule.run_dir import BUNDLE, ENVELOPE, PUBLIC_KEY, RunDir

if TYPE_CHECKING:
    from capsule.prereg.ledger import Ledger
    from capsule.prereg.ledger_entries import Entry

BUNDLE_OUTPUTS = frozenset({BUNDLE, ENVELOPE, PUBLIC_KEY})  # top level of the run dir only
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:capsule:run-bundle:v1"


@dataclass(frozen=True)
class BundleResult:
    """What `make_bundle` wrote and recorded."""

    bundle_path: Path
    envelope_path: Path
    public_key_path: Path
    bundle_sha256: str  # of bundle.json's bytes
    envelope_sha256: str  # of bundle.dsse.json's bytes: "the bundle's digest" in the ledger
    fingerprint: str
    n_files: int
    total_bytes: int
    ledger_entry: Entry | None


def list_run_files(run_dir: Path) -> list[str]:
    """Sorted relative paths of every file under `run_dir` except the bundle outputs.

    Symlinks and other non-regular files are errors: a bundle digests bytes it owns, and a link could
    point anywhere. Nothing is opened or followed (the same check guards `capsule verify`, which
    runs it on every call, hence `os.scandir`). Raises VerificationError.
    """
    found: list[str] = []
    pending = [("", os.fspath(run_dir))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                relative = prefix + entry.name
                if entry.is_symlink():
                    raise VerificationError(f"{entry.path}: a symlink; run directories hold plain files only")
                if entry.is_dir(follow_symlinks=False):
                    pending.append((relative + "/", entry.path))
                elif not entry.is_file(follow_symlinks=False):
                    raise VerificationError(f"{entry.path}: not a regular file; remove it from the run dir")
                elif relative not in BUNDLE_OUTPUTS:
                    found.append(relative)
    return sorted(found)


def collect_files(run_dir: Path) -> list[FileRecord]:
    """Digest every file of the run directory (bytes as stored, so `.jsonl.gz` stays compressed)."""
    records = []
    for relative in list_run_files(run_dir):
        path = run_dir / relative
        records.append(FileRecord(relative, sha256_file(path), path.stat().st_size))
    return records


def build_statement(index: BundleIndex, bundle_sha256: str) -> dict[str, Any]:
    """The in-toto Statement v1: one subject per bundled file; the predicate holds the run's facts."""
    subjects = [
        {"name": item.path, "digest": {"sha256": item.sha256}, "annotations": {"size": item.size}}
        for item in index.files
    ]
    bundle = index.to_json()
    predicate = {key: bundle[key] for key in ("run_id", "plan", "manifest_digest", "ledger_heads", "key")}
    predicate["bundle_json_sha256"] = bundle_sha256
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPE,
            "predicate": predicate}


def make_bundle(
    run_dir: Path,
    *,
    run_id: str,
    plan_path: str,
    plan_sha256: str,
    manifest_digest: str,
    ledger_head_at_start: str,
    key: SigningKey,
    ledger: Ledger | None,
) -> BundleResult:
    """Digest, state, sign and record a finished run directory; returns what was written.

    Writes bundle.json, bundle.pub.pem and bundle.dsse.json (last, atomically), then appends a
    `bundle` entry (envelope digest, run id, key fingerprint) to `ledger` when one is given, holding
    the ledger's lock from reading its head to the append. The ledger is re-read first if its file
    grew: a run takes hours, and other plans may have been sealed.
    """
    facts = {
        "run_id": run_id, "plan_path": plan_path, "plan_sha256": plan_sha256,
        "manifest_digest": manifest_digest, "ledger_head_at_start": ledger_head_at_start,
    }
    if ledger is None:
        return _sign(run_dir, facts, key, None)
    with ledger.locked():  # the head recorded at signing is still the head when the entry is appended
        return _sign(run_dir, facts, key, ledger.current())


def _sign(run_dir: Path, facts: dict[str, str], key: SigningKey, ledger: Ledger | None) -> BundleResult:
    """make_bundle's steps, each restartable: a crash before the ledger entry leaves a run that is
    not finished (`capsule.pipeline.opening`), and signing it again overwrites all three files."""
    if ledger is not None:
        entry_path = ledger.relative(RunDir(run_dir).envelope)  # outside the repository: fail before writing
    if not run_dir.is_dir():
        raise BadInputError(f"run directory {run_dir} does not exist")
    try:
        files = collect_files(run_dir)
    except VerificationError as error:
        raise BadInputError(str(error)) from error
    fingerprint = fingerprint_of(key.public_key)
    run_id = facts["run_id"]
    index = BundleIndex(
        run_id=run_id,
        plan=PlanRef(facts["plan_path"], facts["plan_sha256"]),
        manifest_digest=facts["manifest_digest"],
        ledger_heads=LedgerHeads(facts["ledger_head_at_start"], ledger.head() if ledger else None),
        key=SignerRef(fingerprint, "ed25519", PUBLIC_KEY),
        created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        files=tuple(files),
    )
    run = RunDir(run_dir)
    bundle_path = run.bundle
    write_json_atomic(bundle_path, index.to_json())
    crash_point("before-public-key")
    bundle_sha256 = sha256_file(bundle_path)
    public_path = run.public_key
    write_bytes_atomic(public_path, public_key_pem(key.public_key))
    crash_point("before-envelope")
    envelope = sign_payload(canonical_json(build_statement(index, bundle_sha256)), key)
    envelope_bytes = (canonical_json(envelope).decode("utf-8") + "\n").encode("utf-8")
    envelope_path = run.envelope
    write_bytes_atomic(envelope_path, envelope_bytes)
    envelope_sha256 = sha256_bytes(envelope_bytes)
    entry = None
    if ledger is not None:
        crash_point("before-ledger")
        entry = ledger.append(BundleEntry(
            path=entry_path, sha256=envelope_sha256, note=f"signed bundle of run {run_id}",
            run_id=run_id, key_fingerprint=fingerprint, bundle_json_sha256=bundle_sha256,
        ))
        crash_point("after-ledger")
    return BundleResult(
        bundle_path, envelope_path, public_path, bundle_sha256, envelope_sha256, fingerprint,
        len(files), sum(record.size for record in files), entry,
    )

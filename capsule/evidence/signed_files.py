"""A run directory against its own signature: what `capsule verify` checks before any ledger.

In order: bundle.json parses (`capsule.evidence.bundle_index`: every field typed, every listed path
inside the run directory, before any listed file is read); the signed in-toto Statement pins
bundle.json's bytes and says what it says; the included key is the signing key, in canonical PEM;
exactly the listed files are there, each of its size and sha256; the manifest is the one the signed
`manifest_digest` names, and every arm sidecar and refusal record is read whole against this run and
machine. Any failure: VerificationError.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from capsule.errors import VerificationError
from capsule.evidence.arm_records import check_arm_records
from capsule.evidence.bundle import PREDICATE_TYPE, STATEMENT_TYPE, build_statement
from capsule.evidence.bundle_index import BundleIndex, FileRecord
from capsule.evidence.signing import fingerprint_of, public_key_pem, read_public_key
from capsule.generation.refused_arms import RunFacts
from capsule.hashing import sha256_bytes, sha256_file, sha256_json
from capsule.jsonio import parse_json, read_input_bytes
from capsule.machine.manifest_record import parse_manifest
from capsule.run_dir import BUNDLE, MANIFEST, NODES, PUBLIC_KEY, RunDir


def read_signed_json(path: Path, label: str) -> tuple[bytes, Any]:
    """A run file verify reads before trusting anything (its bytes and parsed JSON); missing or
    malformed is a failed verification (exit 3), not bad input."""
    if not path.exists():
        raise VerificationError(f"{path}: {label} is missing; is this a bundled run directory?")
    data = read_input_bytes(path, label, error=VerificationError)
    return data, parse_json(data, str(path), error=VerificationError)


def choose_key(run_dir: Path, pubkey: Path | None) -> tuple[Any, str]:
    """The key the signature is checked with: the one pinned with `--key`, else the included one."""
    if pubkey is not None:
        return read_public_key(pubkey), f"given key {pubkey}"
    return read_public_key(RunDir(run_dir).public_key), f"included key {PUBLIC_KEY}"


def check_statement(statement: Any, bundle: BundleIndex, bundle_bytes: bytes, where: str) -> None:
    """The signed Statement must pin bundle.json's bytes and say exactly what bundle.json says."""
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise VerificationError(f"{where}: payload is not an in-toto Statement v1")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise VerificationError(
            f"{where}: predicateType {statement.get('predicateType')!r}, expected {PREDICATE_TYPE!r}"
        )
    predicate = statement.get("predicate")
    signed_digest = predicate.get("bundle_json_sha256") if isinstance(predicate, dict) else None
    actual = sha256_bytes(bundle_bytes)
    if signed_digest != actual:
        raise VerificationError(f"{BUNDLE}: sha256 {actual}, the signed statement pins {signed_digest}")
    if statement != build_statement(bundle, actual):
        raise VerificationError(f"{where}: signed statement disagrees with {BUNDLE}")


def check_included_key(run_dir: Path, key: Any, signed_fingerprint: str) -> None:
    """bundle.pub.pem must be the signing key, byte for byte in canonical PEM."""
    path = RunDir(run_dir).public_key
    included = read_public_key(path)
    fingerprint, included_fingerprint = fingerprint_of(key), fingerprint_of(included)
    if fingerprint != signed_fingerprint:
        raise VerificationError(f"signed bundle names key {signed_fingerprint}; verified by {fingerprint}")
    if included_fingerprint != fingerprint:
        raise VerificationError(f"{path}: key {included_fingerprint}, not the verifying key {fingerprint}")
    if path.read_bytes() != public_key_pem(included):
        raise VerificationError(f"{path}: not in canonical PEM form (bytes were altered)")


def check_files(run_dir: Path, on_disk: list[str], listed: tuple[FileRecord, ...]) -> None:
    """Exactly the listed files are on disk, each of the listed size and sha256."""
    names = {item.path for item in listed}
    missing, extra = sorted(names - set(on_disk)), sorted(set(on_disk) - names)
    if missing or extra:
        raise VerificationError(
            f"{run_dir}: files differ from the bundle: missing {missing or 'none'}, extra {extra or 'none'}"
        )
    root = os.fspath(run_dir)
    for item in listed:
        path = os.path.join(root, item.path)  # plain strings: this loop runs once per tamper-test flip
        size = os.stat(path).st_size
        if size != item.size:
            raise VerificationError(f"{item.path}: {size} bytes on disk, {item.size} in the bundle")
        digest = sha256_file(Path(path))
        if digest != item.sha256:
            raise VerificationError(f"{item.path}: sha256 {digest} on disk, {item.sha256} in the bundle")


def check_machine(run_dir: Path, bundle: BundleIndex) -> None:
    """The signed `manifest_digest` must be the digest of the run's manifest.json (its canonical JSON,
    as `capsule.machine.manifest.manifest_digest` computes it): a manifest edited and signed again
    with the old facts is refused. Each other node's manifest (`nodes/<digest>.json`, lanes on a Ray
    cluster) must have the digest its name says. Then every arm sidecar and refusal record is read
    whole against this run and the machines it holds manifests of (`capsule.evidence.arm_records`).
    Their bytes were checked already."""
    machines: dict[str, int | None] = {bundle.manifest_digest: None}
    if bundle.listed(MANIFEST) is not None:
        manifest = parse_json(RunDir(run_dir).manifest.read_bytes(), str(RunDir(run_dir).manifest),
                              error=VerificationError)
        digest = sha256_json(manifest)
        if digest != bundle.manifest_digest:
            raise VerificationError(
                f"{MANIFEST}: its digest {digest} is not the bundle's manifest_digest "
                f"{bundle.manifest_digest} (the manifest was changed after the run recorded it)"
            )
        machines[digest] = len(parse_manifest(manifest).gpus)
    machines.update(_node_machines(run_dir, bundle.files))
    facts = RunFacts(bundle.run_id, bundle.plan.sha256, bundle.manifest_digest,
                     frozenset(machines) - {bundle.manifest_digest})
    check_arm_records(run_dir, bundle.files, facts, machines)


def _node_machines(run_dir: Path, listed: tuple[FileRecord, ...]) -> dict[str, int | None]:
    """Each listed node manifest's digest (checked against its name) and GPU count."""
    machines: dict[str, int | None] = {}
    for item in listed:
        if not item.path.startswith(f"{NODES}/"):
            continue
        named = item.path.removeprefix(f"{NODES}/").removesuffix(".json")
        manifest = parse_json((run_dir / item.path).read_bytes(), item.path, error=VerificationError)
        digest = sha256_json(manifest)
        if digest != named or not item.path.endswith(".json"):
            raise VerificationError(
                f"{item.path}: its digest is {digest}, not the one its name says (a node's manifest "
                "was changed after its lane recorded it)"
            )
        machines[digest] = len(parse_manifest(manifest).gpus)
    return machines

"""`capsule verify`: check a signed run bundle offline, stopping at the first thing that differs.

Order (cheap and safe first): no symlinks or odd files in the run directory; `bundle.json` parses
and every listed path stays inside the run directory (before any listed file is read); the DSSE
signature verifies with the given or the included key; the signed Statement pins `bundle.json`
and agrees with it; the included key is the signing key; no file is missing or extra; every file's
size and sha256 match; the ledger verifies, the plan's seal precedes the run's start, and the
`bundle` entry pins this envelope and key; the signing key is trusted for the run's plan
(`capsule.evidence.trust`) or pinned by the user. Any failure raises VerificationError (exit 3).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError, CapsuleError, VerificationError
from capsule.evidence.arm_records import check_arm_records
from capsule.evidence.bundle import (
    BUNDLE_SCHEMA,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    build_statement,
    check_member_path,
    list_run_files,
)
from capsule.evidence.signing import fingerprint_of, public_key_pem, read_public_key, verify_envelope
from capsule.evidence.trust import SignerVerdict, check_signer
from capsule.generation.refused_arms import RunFacts
from capsule.hashing import sha256_bytes, sha256_file, sha256_json
from capsule.jsonio import parse_json, read_input_bytes
from capsule.prereg.anchor import anchored_entries, check_anchor
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import ImportEntry
from capsule.run_dir import (
    BUNDLE,
    ENVELOPE,
    MANIFEST,
    PLAN_COPY,
    PUBLIC_KEY,
    RunDir,
)


@dataclass(frozen=True)
class VerifySummary:
    """What `verify_run` established, for a one-line report."""
    run_id: str
    n_files: int
    total_bytes: int
    fingerprint: str
    key_source: str
    plan_path: str
    plan_seq: int | None
    start_seq: int | str | None  # a seq here, or "N of the imported chain"
    bundle_seq: int | None
    ledger_path: Path | None  # None: checked without a ledger (signature and digests only)
    ledger_entries: int
    trust: str  # which key signed and why it is accepted (`capsule.evidence.trust.SignerVerdict.why`)
    trusted_by: str = "not checked (no ledger)"  # `SignerVerdict.source`: plan, signers entry or --key

    def line(self) -> str:
        """One line: files, signature (and which key, and why it is trusted), plan seal order, ledger."""
        if self.ledger_path is None:
            return (
                f"OK run {self.run_id}: {self.n_files} files ({self.total_bytes} bytes) match; signature by "
                f"{self.fingerprint[:16]} ({self.key_source}); plan {self.plan_path}; not in this ledger "
                "(signature and digests only; no trust root without a ledger)"
            )
        return (
            f"OK run {self.run_id}: {self.n_files} files ({self.total_bytes} bytes) match; signature by "
            f"{self.fingerprint} ({self.key_source}); {self.trust}; plan {self.plan_path} sealed at ledger "
            f"entry {self.plan_seq}, before the run started (head: entry {self.start_seq}); bundle entry "
            f"{self.bundle_seq}; ledger {self.ledger_path} ({self.ledger_entries} entries) verifies"
        )


def _read_json(path: Path, label: str) -> tuple[bytes, Any]:
    if not path.exists():
        raise VerificationError(f"{path}: {label} is missing; is this a bundled run directory?")
    data = read_input_bytes(path, label, error=VerificationError)
    return data, parse_json(data, str(path), error=VerificationError)


def _field(mapping: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(mapping, dict) or key not in mapping or not isinstance(mapping[key], kind):
        raise VerificationError(f"{where}: field {key!r} is missing or has the wrong type")
    return mapping[key]


def _read_index(run_dir: Path) -> tuple[bytes, dict[str, Any]]:
    """Parse bundle.json and check its shape and every listed path, reading no listed file."""
    where = str(RunDir(run_dir).bundle)
    data, bundle = _read_json(RunDir(run_dir).bundle, BUNDLE)
    if _field(bundle, "schema", str, where) != BUNDLE_SCHEMA:
        raise VerificationError(f"{where}: schema {bundle['schema']!r}, expected {BUNDLE_SCHEMA!r}")
    for key, kind in (("run_id", str), ("plan", dict), ("manifest_digest", str), ("ledger_heads", dict),
                      ("key", dict), ("files", list)):
        _field(bundle, key, kind, where)
    _field(bundle["plan"], "path", str, f"{where} plan")
    _field(bundle["plan"], "sha256", str, f"{where} plan")
    _field(bundle["ledger_heads"], "at_start", str, f"{where} ledger_heads")
    _field(bundle["ledger_heads"], "at_bundle", (str, type(None)), f"{where} ledger_heads")
    _field(bundle["key"], "fingerprint", str, f"{where} key")
    seen: set[str] = set()
    for index, item in enumerate(bundle["files"]):
        item_where = f"{where} files[{index}]"
        path = check_member_path(_field(item, "path", str, item_where), item_where)
        _field(item, "sha256", str, item_where)
        if not isinstance(item.get("size"), int) or isinstance(item["size"], bool):
            raise VerificationError(f"{item_where}: field 'size' is missing or has the wrong type")
        if path in seen:
            raise VerificationError(f"{item_where}: {path} is listed twice")
        seen.add(path)
    return data, bundle


def _choose_key(run_dir: Path, pubkey: Path | None) -> tuple[Any, str]:
    if pubkey is not None:
        return read_public_key(pubkey), f"given key {pubkey}"
    return read_public_key(RunDir(run_dir).public_key), f"included key {PUBLIC_KEY}"


def _check_statement(statement: Any, bundle: dict[str, Any], bundle_bytes: bytes, where: str) -> None:
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


def _check_included_key(run_dir: Path, key: Any, signed_fingerprint: str) -> None:
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


def _check_files(run_dir: Path, on_disk: list[str], listed: list[dict[str, Any]]) -> None:
    names = {item["path"] for item in listed}
    missing, extra = sorted(names - set(on_disk)), sorted(set(on_disk) - names)
    if missing or extra:
        raise VerificationError(
            f"{run_dir}: files differ from the bundle: missing {missing or 'none'}, extra {extra or 'none'}"
        )
    root = os.fspath(run_dir)
    for item in listed:
        path = os.path.join(root, item["path"])  # plain strings: this loop runs once per tamper-test flip
        size = os.stat(path).st_size
        if size != item["size"]:
            raise VerificationError(f"{item['path']}: {size} bytes on disk, {item['size']} in the bundle")
        digest = sha256_file(Path(path))
        if digest != item["sha256"]:
            raise VerificationError(
                f"{item['path']}: sha256 {digest} on disk, {item['sha256']} in the bundle"
            )


def _check_machine(run_dir: Path, bundle: dict[str, Any], listed: list[dict[str, Any]]) -> None:
    """The signed `manifest_digest` must be the digest of the run's manifest.json (its canonical JSON,
    as `capsule.machine.manifest.manifest_digest` computes it): a manifest edited and signed again
    with the old facts is refused. Then every arm sidecar and refusal record is read whole against
    this run and machine (`capsule.evidence.arm_records`). Their bytes were checked already."""
    gpu_count = None
    if any(item["path"] == MANIFEST for item in listed):
        manifest = parse_json(RunDir(run_dir).manifest.read_bytes(), str(RunDir(run_dir).manifest),
                              error=VerificationError)
        digest = sha256_json(manifest)
        if digest != bundle["manifest_digest"]:
            raise VerificationError(
                f"{MANIFEST}: its digest {digest} is not the bundle's manifest_digest "
                f"{bundle['manifest_digest']} (the manifest was changed after the run recorded it)"
            )
        gpus = manifest.get("gpus") if isinstance(manifest, dict) else None
        gpu_count = len(gpus) if isinstance(gpus, list) else 0
    facts = RunFacts(bundle["run_id"], bundle["plan"]["sha256"], bundle["manifest_digest"])
    check_arm_records(run_dir, listed, facts, gpu_count)


def _load_ledger(ledger_path: Path) -> Ledger:
    if not ledger_path.is_file():
        raise VerificationError(f"ledger {ledger_path} not found; pass --ledger PATH")
    try:
        ledger = Ledger.load(ledger_path)
        ledger.verify()
    except VerificationError:
        raise
    except CapsuleError as error:
        raise VerificationError(f"ledger {ledger_path} does not verify: {error}") from error
    return ledger


def _check_import(ledger: Ledger, ledger_path: Path, bundle: dict[str, Any], imported: ImportEntry,
                  fingerprint: str) -> tuple[int, str, int]:
    """A run made elsewhere and imported (`capsule import`): the import entry pins this envelope and
    key, and names this ledger's record of the run's plan (its order against the run's start was
    checked in the foreign chain when the run was imported)."""
    seal = ledger.with_hash(imported.seal)
    plan_path, plan_sha = bundle["plan"]["path"], bundle["plan"]["sha256"]
    if seal is None or seal.path != plan_path or seal.sha256 != plan_sha:
        raise VerificationError(
            f"ledger {ledger_path}: import entry {imported.seq} names seal {imported.seal}, "
            f"which does not record the run's plan {plan_path} at sha256 {plan_sha}"
        )
    if imported.key_fingerprint != fingerprint:
        raise VerificationError(
            f"ledger import entry {imported.seq} records key {imported.key_fingerprint}, "
            f"the bundle is signed by {fingerprint}"
        )
    return seal.seq, f"{imported.foreign_start_seq} of the imported chain", imported.seq


def check_ledger(ledger: Ledger, ledger_path: Path, bundle: dict[str, Any], envelope_sha256: str,
                 fingerprint: str) -> tuple[int, int | str, int]:
    """Plan sealed before the run's start head; a bundle entry pins this envelope and key (or, for a
    run imported from another machine, an import entry does). Returns the seqs of the plan record,
    the start head and the bundle (or import) entry."""
    imported = [e for e in ledger.run_entries(bundle["run_id"])
                if isinstance(e, ImportEntry) and e.sha256 == envelope_sha256]
    if imported:
        return _check_import(ledger, ledger_path, bundle, imported[-1], fingerprint)
    start = ledger.with_hash(bundle["ledger_heads"]["at_start"])
    if start is None:
        raise VerificationError(
            f"ledger {ledger_path}: the run's start head {bundle['ledger_heads']['at_start']} is none of "
            "its entries"
        )
    plan_path, plan_sha = bundle["plan"]["path"], bundle["plan"]["sha256"]
    for_plan = ledger.file_records(plan_path)
    before = [entry for entry in for_plan if entry.seq <= start.seq]
    if not before:
        later = f"; it was sealed at entry {for_plan[0].seq}" if for_plan else ""
        raise VerificationError(
            f"plan {plan_path} was not sealed before the run started (start head: entry "
            f"{start.seq}){later}"
        )
    plan_entry = before[-1]
    superseded = ledger.superseded_by(plan_path, at_seq=start.seq)
    if superseded is not None:
        raise VerificationError(
            f"plan {plan_path} was superseded by {superseded.path} (amend, entry "
            f"{superseded.seq}) before the run started; runs must use the amended plan"
        )
    if plan_entry.sha256 != plan_sha:
        raise VerificationError(
            f"plan {plan_path}: the run used sha256 {plan_sha}, the ledger's {plan_entry.kind} entry "
            f"{plan_entry.seq} (in force at the run's start) records {plan_entry.sha256}"
        )
    started = ledger.start_entry(bundle["run_id"])
    moved = started is not None and started.hash != start.hash
    if started is not None and (moved or (started.path, started.sha256) != (plan_path, plan_sha)):
        raise VerificationError(
            f"ledger {ledger_path}: run {bundle['run_id']} started at its start entry {started.seq} "
            f"(plan {started.path}), but its bundle names entry {start.seq} as its start head and plan "
            f"{plan_path}: the run's start was rewritten after the ledger recorded it"
        )
    run_id = bundle["run_id"]
    matching = ledger.bundle_entries(run_id, envelope_sha256)
    if not matching:
        recorded = ", ".join(entry.sha256 for entry in ledger.bundle_entries(run_id)) or "no bundle entry"
        raise VerificationError(
            f"ledger {ledger_path}: run {run_id}: {ENVELOPE} has sha256 {envelope_sha256}; "
            f"ledger has {recorded}"
        )
    bundle_entry = matching[-1]
    at_bundle = ledger.with_hash(bundle["ledger_heads"].get("at_bundle"))
    if at_bundle is None or not start.seq <= at_bundle.seq < bundle_entry.seq:
        raise VerificationError(
            f"ledger {ledger_path}: the bundle's head at signing {bundle['ledger_heads'].get('at_bundle')} "
            f"is not an entry between the run's start (entry {start.seq}) and its bundle entry "
            f"{bundle_entry.seq}"
        )
    if bundle_entry.key_fingerprint != fingerprint:
        raise VerificationError(
            f"ledger bundle entry {bundle_entry.seq} records key "
            f"{bundle_entry.key_fingerprint}, the bundle is signed by {fingerprint}"
        )
    return plan_entry.seq, start.seq, bundle_entry.seq


LEGACY_START = 0  # the start of a run with no `start` entry, for the trust rule (see `start_seq_of`)


def start_seq_of(ledger: Ledger, bundle: dict[str, Any]) -> int:
    """The seq at which the run started, as the ledger decides: its `start` entry, appended when the
    run was opened (`check_ledger` requires the run's start head to name it). A run with none (opened
    before starts were recorded, or never against this ledger) has only its own word for its start
    (`ledger_heads.at_start`, which its signer writes), so it counts as started before every entry
    (`LEGACY_START`): a key that a `signers` entry added signs it only where the anchored history
    vouches for a signature bundled before that entry (`check_signer`)."""
    started = ledger.start_entry(str(bundle.get("run_id")))
    return LEGACY_START if started is None else started.seq


def check_trust(ledger: Ledger, ledger_path: Path, bundle: dict[str, Any], fingerprint: str,
                plan_bytes: bytes | None, pubkey: Path | None, *, bundled_at: int | None,
                imported_at: int | None = None, remedy: str | None = None) -> SignerVerdict:
    """The trust rule (`capsule.evidence.trust.check_signer`) for a run of `bundle`: its key trusted for
    its plan by the plan itself or by a `signers` entry at or before the run's start (or one that
    vouches, from the anchored history, for a signature bundled before it). The one rule `verify`,
    `compare` and `check-numbers` apply, recorded in the ledger or not.

    `imported_at`: the seq of this ledger's `import` entry of the run, for a run made elsewhere. Its
    start is then the import, an append of this ledger that the run's signer did not write: a key
    trusted by a `signers` entry before the import signs it (the import itself checked the run's own
    start in the foreign chain), one added after it does not."""
    def anchored() -> int:
        return anchored_entries(ledger_path, ledger_path.read_bytes(), ledger.hashes())

    try:  # before the ledger's own checks: a re-signed forgery is named by its untrusted key
        return check_signer(
            ledger, bundle["plan"]["path"], fingerprint, plan_bytes=plan_bytes, pinned=pubkey,
            bundled_at=bundled_at, anchored=anchored,
            started_at=imported_at if imported_at is not None else start_seq_of(ledger, bundle),
            **({"remedy": remedy} if remedy is not None else {}),
        )
    except CapsuleError as error:  # an unreadable plan copy is a failed verification too
        raise VerificationError(f"run {bundle['run_id']}: {error}") from error


def verify_run(run_dir: Path, *, pubkey: Path | None, ledger_path: Path | None) -> VerifySummary:
    """Verify a bundled run directory against its signature, its files and the ledger; see module doc.
    `ledger_path=None` stops after the files (a run from elsewhere that this ledger does not record).
    A run whose re-sign was interrupted (its undo journal is there) is refused, whatever its files say:
    it is between two signatures until `capsule report RUN --resign` finishes or undoes that."""
    if not Path(run_dir).is_dir():  # click lets a FIFO or a device through as "not a file"
        raise BadInputError(f"{run_dir}: not a directory; give a run directory")
    journal = RunDir(run_dir).resign_journal
    if os.path.lexists(journal):
        raise VerificationError(
            f"{run_dir}: a `capsule report --resign` of this run was interrupted ({journal} holds the files "
            f"it was replacing); run `capsule report {run_dir} --resign` to finish or undo it"
        )
    return verify_signed_state(run_dir, pubkey=pubkey, ledger_path=ledger_path)


def verify_signed_state(run_dir: Path, *, pubkey: Path | None, ledger_path: Path | None) -> VerifySummary:
    """`verify_run`'s checks of the files as they stand, without refusing a run whose re-sign was
    interrupted: what the re-sign's recovery asks to decide between finishing and undoing."""
    on_disk = list_run_files(run_dir)  # rejects symlinks and odd files before anything is read
    bundle_bytes, bundle = _read_index(run_dir)
    key, key_source = _choose_key(run_dir, pubkey)
    envelope_bytes, envelope = _read_json(RunDir(run_dir).envelope, ENVELOPE)
    where = str(RunDir(run_dir).envelope)
    payload = verify_envelope(envelope, key, where)
    statement = parse_json(payload, f"{where} (signed payload)", error=VerificationError)
    _check_statement(statement, bundle, bundle_bytes, where)
    fingerprint = fingerprint_of(key)
    _check_included_key(run_dir, key, bundle["key"]["fingerprint"])
    listed = bundle["files"]
    _check_files(run_dir, on_disk, listed)
    plan_item = next((item for item in listed if item["path"] == PLAN_COPY), None)
    if plan_item is not None and plan_item["sha256"] != bundle["plan"]["sha256"]:
        raise VerificationError(
            f"{PLAN_COPY}: sha256 {plan_item['sha256']}, the run's plan is {bundle['plan']['sha256']}"
        )
    if ledger_path is None:
        _check_machine(run_dir, bundle, listed)
        return VerifySummary(
            bundle["run_id"], len(listed), sum(item["size"] for item in listed), fingerprint, key_source,
            bundle["plan"]["path"], None, None, None, None, 0, "trust not checked (no ledger)",
        )
    ledger = _load_ledger(ledger_path)
    envelope_sha256 = sha256_bytes(envelope_bytes)
    plan_bytes = RunDir(run_dir).plan.read_bytes() if plan_item is not None else None  # verified above
    recorded = [e.seq for e in ledger.bundle_entries(bundle["run_id"], envelope_sha256)]
    imported = [e.seq for e in ledger.run_entries(bundle["run_id"])
                if isinstance(e, ImportEntry) and e.sha256 == envelope_sha256]
    verdict = check_trust(ledger, ledger_path, bundle, fingerprint, plan_bytes, pubkey,
                          bundled_at=recorded[-1] if recorded else None,
                          imported_at=imported[-1] if imported else None)
    plan_seq, start_seq, bundle_seq = check_ledger(ledger, ledger_path, bundle, envelope_sha256, fingerprint)
    check_anchor(ledger_path, ledger_path.read_bytes(), ledger.hashes(), None)
    _check_machine(run_dir, bundle, listed)
    return VerifySummary(
        bundle["run_id"], len(listed), sum(item["size"] for item in listed), fingerprint, key_source,
        bundle["plan"]["path"], plan_seq, start_seq, bundle_seq, ledger_path, len(ledger.entries),
        verdict.why, verdict.source,
    )


def verify_unrecorded(run_dir: Path, ledger_path: Path, pubkey: Path | None = None) -> VerifySummary:
    """A run this ledger does not record (made elsewhere, not imported): its signature and every file,
    then the same trust rule as `verify_run`: its plan bytes are a version this ledger records for
    its plan path (else the plan copy's own `[evidence] signers` would vouch for itself), and its key
    is trusted for that plan here (or pinned: `pubkey`, as `verify --key`). What `compare` and
    `check-numbers` apply to such a run."""
    summary = verify_run(run_dir, pubkey=pubkey, ledger_path=None)
    ledger = _load_ledger(ledger_path)
    _data, bundle = _read_index(run_dir)
    plan_path, plan_sha = bundle["plan"]["path"], bundle["plan"]["sha256"]
    if not any(e.sha256 == plan_sha for e in ledger.file_records(plan_path)):
        raise VerificationError(
            f"run {bundle['run_id']}: its plan {plan_path} (sha256 {plan_sha}) is no version {ledger_path} "
            "records, so no key is trusted for it here"
        )
    plan_copy = RunDir(run_dir).plan
    verdict = check_trust(ledger, ledger_path, bundle, summary.fingerprint,
                          plan_copy.read_bytes() if plan_copy.is_file() else None, pubkey, bundled_at=None)
    return replace(summary, trust=verdict.why, trusted_by=verdict.source)

"""Which keys may sign a plan's runs: the plan's own `[evidence] signers`, plus sealed `signers` entries.

A plan names, by fingerprint (`capsule.evidence.signing.fingerprint_of`: sha256 of the public key's
DER SubjectPublicKeyInfo), the keys allowed to sign its results. Plans sealed before that field
existed, or a key made later (a lost private key, a new machine), get keys through a `signers`
ledger entry appended by `capsule prereg signers PLAN --add FP --reason ...`:

    {"kind": "signers", "path": <plan>, "sha256": <the plan's latest recorded hash>,
     "fingerprints": [<fp>, ...], "note": <reason>, ...the usual seq / prev / time / hash}

The rule: the keys trusted for a plan are those its sealed bytes list, plus those of every `signers`
entry for its path anywhere in the ledger. Keys are only ever added, and each addition is a sealed,
visible amendment: it is in the chain (and so under the anchor once committed), and `capsule verify`
names the entry that made a key trusted and whether it came after the run was bundled. An amended
plan does not inherit its predecessor's signer entries: it lists its own keys.

This module owns the rule and the ledger entry; `capsule.evidence.trust` applies it to a signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError, VerificationError
from capsule.hashing import sha256_bytes, sha256_file
from capsule.jsonio import read_input_bytes
from capsule.prereg.chain import SHA256_HEX
from capsule.prereg.ledger import DEFAULT_LEDGER, Ledger
from capsule.prereg.ledger_entries import Entry, SignersEntry
from capsule.prereg.loader import plan_file
from capsule.prereg.plan_tables import plan_signers


@dataclass(frozen=True)
class Grant:
    """Why one key is trusted for a plan: listed in the plan itself (seq None) or added by an entry."""

    fingerprint: str
    seq: int | None  # the `signers` entry that added it; None: the plan's own [evidence] signers
    why: str  # one clause, e.g. "added by signers entry 15 (2026-12-01T11:00:00Z): the key was lost"


def _plan_bytes(ledger: Ledger, plan_path: str) -> bytes:
    """The plan's bytes in the checkout, which must be a version the ledger recorded for its path."""
    file = ledger.root / plan_path
    if not file.is_file() or file.is_symlink():
        raise VerificationError(f"plan {plan_path} is not in the checkout at {ledger.root} as a plain file")
    data = read_input_bytes(file, "plan", error=VerificationError)
    recorded = {e.sha256 for e in ledger.file_records(plan_path)}
    if sha256_bytes(data) not in recorded:
        raise VerificationError(f"plan {plan_path}: its bytes are none of the versions {ledger.path} records")
    return data


def trusted_signers(ledger: Ledger, plan_path: str, plan_bytes: bytes | None = None) -> dict[str, Grant]:
    """Every key trusted to sign runs of `plan_path` (repo-relative), by fingerprint, with why.

    `plan_bytes`: the plan a run used, already checked against the ledger by the caller (a run's
    `plan.toml` copy); None reads the plan in the checkout, which must be a recorded version.
    """
    data = plan_bytes if plan_bytes is not None else _plan_bytes(ledger, plan_path)
    grants = {
        fingerprint: Grant(fingerprint, None, f"listed in {plan_path} [evidence] signers")
        for fingerprint in plan_signers(data, Path(plan_path))
    }
    for entry in ledger.entries:
        if not isinstance(entry, SignersEntry) or entry.path != plan_path:
            continue
        for fingerprint in entry.fingerprints:
            grants.setdefault(
                fingerprint,
                Grant(fingerprint, entry.seq, f"added by signers entry {entry.seq} ({entry.time}): "
                      f"{entry.note}"),
            )
    return grants


def add_signers(
    plan: Path, fingerprints: list[str], reason: str, ledger_path: Path = DEFAULT_LEDGER
) -> tuple[Entry | None, list[str]]:
    """Append one `signers` entry trusting `fingerprints` for the sealed plan `plan` (its plan.toml or
    directory); returns the entry (None if every key was already trusted) and the keys skipped as
    already trusted. The plan must be sealed and intact; the ledger must verify first."""
    if not reason.strip():
        raise BadInputError("--reason must say why these keys may sign the plan's runs")
    if not fingerprints:
        raise BadInputError("name at least one key: --add FINGERPRINT (as `capsule keygen` prints it)")
    for fingerprint in fingerprints:
        if not SHA256_HEX.match(fingerprint):
            raise BadInputError(
                f"--add {fingerprint!r}: not a key fingerprint (64 lowercase hex digits, as `capsule keygen` "
                "or `capsule verify` prints it)"
            )
    ledger = Ledger.load(ledger_path)
    ledger.verify()
    file = plan_file(Path(plan))
    relative = ledger.relative(file)
    latest = ledger.latest_for(relative)
    if latest is None or not ledger.is_plan(relative):
        raise BadInputError(f"{relative}: not a sealed plan in {ledger.path}; seal it first")
    if not file.is_file() or sha256_file(file) != latest.sha256:
        raise VerificationError(
            f"{relative}: its bytes no longer match seq {latest.seq}; restore it first"
        )
    already = trusted_signers(ledger, relative)
    new = list(dict.fromkeys(f for f in fingerprints if f not in already))
    skipped = sorted(set(fingerprints) & set(already))
    if not new:
        return None, skipped
    entry = ledger.append(
        SignersEntry(path=relative, sha256=latest.sha256, note=reason.strip(), fingerprints=new)
    )
    return entry, skipped

"""The trust root: is the key that signed a run one its plan allows?

A valid signature only proves that the run matches the key shipped inside it; anyone can make a key.
What makes a signature evidence is that the key is one the plan named before any result existed, or
one a sealed, visible `signers` ledger entry added (the rule: `capsule.prereg.signers`). Every place
that accepts a signed run asks `check_signer`: `capsule verify`, `report --resign` (which signs only
with a trusted key) and the import of a foreign run.

A user may pin a key instead (`capsule verify --key PEM`): the signature must then be by that key,
and the pinned key is accepted whether or not the plan lists it; the verdict says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from capsule.errors import VerificationError
from capsule.prereg.ledger import Ledger
from capsule.prereg.signers import Grant, trusted_signers

__all__ = ["Grant", "SignerVerdict", "check_signer", "trusted_signers", "untrusted_warning"]


@dataclass(frozen=True)
class SignerVerdict:
    """Which key signed, and why it is accepted (one clause for a one-line summary)."""

    fingerprint: str
    grant: Grant | None  # None: not trusted for the plan, accepted only because the user pinned it
    why: str

    @property
    def source(self) -> str:
        """How the signature is trusted, in a few words: by the plan itself, by a `signers` entry, or
        only by a key pinned with `--key` on the command line (which the plan does not trust)."""
        if self.grant is None:
            return "only pinned by --key on the command line (the plan does not trust this key)"
        if self.grant.seq is None:
            return "by the plan ([evidence] signers)"
        return f"by signers entry {self.grant.seq}"


def _untrusted(fingerprint: str, plan_path: str, grants: dict[str, Grant], ledger: Ledger) -> str:
    listed = ", ".join(f[:16] for f in sorted(grants)) or "no key"
    return (
        f"signed by key {fingerprint}, which is not trusted for plan {plan_path}: the plan and the "
        f"signers entries of {ledger.path} trust {listed}"
    )


def check_signer(
    ledger: Ledger,
    plan_path: str,
    fingerprint: str,
    *,
    plan_bytes: bytes | None = None,
    pinned: Path | None = None,
    bundled_at: int | None = None,
    started_at: int | None = None,
    anchored: Callable[[], int] | None = None,
    remedy: str = "if you trust it, pin it with --key PUBLIC_KEY.pem",
) -> SignerVerdict:
    """Accept `fingerprint` as a signer of a run of `plan_path`, or raise VerificationError (exit 3)
    naming the key and the keys the plan trusts.

    `plan_bytes`: the plan the run used (see `trusted_signers`); `pinned`: the public key file the user
    pinned with `--key` (the signature was checked against it), which accepts an untrusted key;
    `bundled_at`: the seq of the run's bundle entry; `started_at`: the seq of the run's start head.
    A key added by a `signers` entry signs only runs that started at or after that entry (an entry
    appended now cannot buy trust for a run already made); the one exception is an entry that came
    after the run's bundle entry and lies in the anchored history (`anchored()`: how many entries the
    published or committed ledger fixes), which vouches for a signature already recorded there.
    `remedy`: the caller's own way out, said first in the refusal.
    """
    grants = trusted_signers(ledger, plan_path, plan_bytes)
    grant = grants.get(fingerprint)
    if grant is not None and grant.seq is not None and started_at is not None and grant.seq > started_at:
        vouched = bundled_at is not None and bundled_at < grant.seq and anchored is not None
        if not (vouched and anchored is not None and anchored() >= grant.seq):
            grant = None
            if pinned is None:
                raise VerificationError(
                    f"signed by key {fingerprint}, which signers entry {_entry_seq(grants, fingerprint)} "
                    f"trusted for plan {plan_path} only after the run started (its start head is entry "
                    f"{started_at}): a key added later signs only later runs (a signature already bundled "
                    "before that entry counts once the entry is in the committed or published ledger); "
                    f"{remedy}"
                )
    if grant is None:
        if pinned is None:
            raise VerificationError(
                _untrusted(fingerprint, plan_path, grants, ledger)
                + f"; {remedy}, or add it to the plan with "
                f"`capsule prereg signers {plan_path} --add {fingerprint} --reason ...`"
            )
        why = f"key {fingerprint[:16]} pinned with --key {pinned}; NOT trusted by plan {plan_path}"
        return SignerVerdict(fingerprint, None, why)
    why = f"key {fingerprint[:16]} trusted for {plan_path}: {grant.why}"
    if grant.seq is not None and bundled_at is not None and grant.seq > bundled_at:
        why += f" (after the run's bundle entry {bundled_at}, in the anchored ledger)"
    if pinned is not None:
        why += f"; also pinned with --key {pinned}"
    return SignerVerdict(fingerprint, grant, why)


def _entry_seq(grants: dict[str, Grant], fingerprint: str) -> object:
    return grants[fingerprint].seq


def untrusted_warning(ledger: Ledger, plan_path: str, fingerprint: str, plan_bytes: bytes) -> str | None:
    """A warning for a run about to be signed by a key its plan does not trust (None if it does): such
    a run is still signed and recorded, but `capsule verify` accepts it only with `--key`."""
    if fingerprint in trusted_signers(ledger, plan_path, plan_bytes):
        return None
    return (
        f"warning: key {fingerprint} is not trusted for {plan_path}; `capsule verify` will accept this "
        f"run only with --key (to trust it: `capsule prereg signers {plan_path} --add {fingerprint} "
        "--reason ...`)"
    )

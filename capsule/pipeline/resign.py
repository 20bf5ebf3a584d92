"""Re-render a signed run's documents and sign it again: the one way a finished run may change.

A finished run is immutable: `capsule reproduce` never reopens a bundled run directory, and
`capsule report` refuses to rewrite one. When the report's rendering improves, the committed
reference run's RESULTS.md and plots would no longer match a fresh rendering, and CI requires
that they do. `resign_run` handles exactly that case, conservatively:

- the run must first verify as signed (signature, every file, ledger chain, a trusted signer), so a
  new signature can never launder a changed generation, score or analysis;
- the new signature is by a key trusted for the run's plan (`capsule.evidence.trust`), checked
  before anything is written;
- only the derived documents (RESULTS.md and plots/) are rewritten, from the unchanged
  analysis.json and manifest.json;
- a new bundle is signed and a new `bundle` ledger entry appended after the old one, which stays:
  the ledger shows both signatures of the run, in order.
- before anything is written, the files it will replace go into an undo journal
  (`capsule.pipeline.resign_journal`), so a re-sign killed at any point is finished or undone by
  running it again, and the run never stays in a state that verifies under neither signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capsule.errors import BadInputError
from capsule.evidence.bundle import BundleResult, make_bundle
from capsule.evidence.bundle_index import read_index
from capsule.evidence.ledger_checks import check_trust
from capsule.evidence.signing import SigningKey, fingerprint_of, load_signing_key
from capsule.evidence.verify import verify_run, verify_signed_state
from capsule.faults import crash_point
from capsule.locks import hold
from capsule.pipeline import resign_journal
from capsule.prereg.ledger import Ledger
from capsule.report.document import changed_outputs, render_outputs, write_outputs
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class ResignResult:
    """What re-signing did: the documents rewritten (empty: nothing to do), the new bundle, and what
    finishing or undoing an earlier, interrupted re-sign did first (None: there was none)."""

    changed: list[str]
    bundle: BundleResult | None
    key_line: str
    recovered: str | None = None


def resign_run(run_dir: Path, *, ledger_path: Path, signing_key: Path | None = None) -> ResignResult:
    """Verify `run_dir`, re-render its RESULTS.md and plots, and sign a new bundle if they changed.

    Raises VerificationError (nothing written) when the run does not verify as it stands or when the
    signing key is not one the run's plan trusts, BusyError when another process writes the run, and
    BadInputError when the run is not signed (`capsule report RUN_DIR` writes an unsigned run's).
    """
    if not RunDir(run_dir).is_bundled:
        raise BadInputError(
            f"{run_dir}: not signed (no {RunDir(run_dir).bundle.name}); `capsule report {run_dir}` writes it"
        )
    with hold(run_dir, f"run directory {run_dir}"):
        return _resign_locked(run_dir, ledger_path, signing_key)


def _resign_locked(run_dir: Path, ledger_path: Path, signing_key: Path | None) -> ResignResult:
    """resign_run's steps, under the run directory's lock."""
    recovered = resign_journal.recover(
        run_dir, lambda: verify_signed_state(run_dir, pubkey=None, ledger_path=ledger_path)
    )
    summary = verify_run(run_dir, pubkey=None, ledger_path=ledger_path)
    signer, key_line = load_signing_key(signing_key)
    fingerprint = fingerprint_of(signer.public_key)
    plan_bytes = RunDir(run_dir).plan.read_bytes() if RunDir(run_dir).plan.is_file() else None
    ledger = Ledger.load(ledger_path)
    bundled = [e.seq for e in ledger.bundle_entries(summary.run_id)]
    check_trust(  # the same rule as verify: a key trusted only after the run started does not sign it
        ledger, ledger_path, read_index(run_dir)[1],
        fingerprint, plan_bytes, None, bundled_at=bundled[-1] if bundled else None,
        remedy="--resign signs only with a key the plan trusts: pass one with --key PRIVATE_KEY.pem",
    )
    rendered = render_outputs(run_dir, fingerprint=fingerprint)  # rendered once: compared, then written
    changed = changed_outputs(run_dir, rendered)
    if not changed:
        return ResignResult([], None, key_line, recovered)
    resign_journal.snapshot(run_dir)
    crash_point("resign-journaled")
    write_outputs(run_dir, rendered)
    crash_point("resign-documents")
    bundle = sign_again(run_dir, key=signer, ledger=Ledger.load(ledger_path))
    resign_journal.discard(run_dir)
    return ResignResult(changed, bundle, key_line, recovered)


def sign_again(run_dir: Path, *, key: SigningKey, ledger: Ledger | None) -> BundleResult:
    """Sign `run_dir` anew with the facts of its current bundle.json (run id, plan, manifest digest,
    ledger head at the start), which must not change between signatures of the same run."""
    old = read_index(run_dir)[1]
    return make_bundle(
        run_dir,
        run_id=old.run_id,
        plan_path=old.plan.path,
        plan_sha256=old.plan.sha256,
        manifest_digest=old.manifest_digest,
        ledger_head_at_start=old.ledger_heads.at_start,
        key=key,
        ledger=ledger,
    )

"""The report and sign stage: RESULTS.md and plots from analysis.json, then the signed bundle.

The report is written first because it is bundled; the bundle digests every file of the run, signs
the digest list and, unless this is a dry run, appends a `bundle` entry to the ledger the run was
opened against (re-read first only if it grew meanwhile).

Every step is restartable: a run killed anywhere before its ledger entry is not finished, so the
same `capsule reproduce` resumes it and runs this stage again, overwriting what the killed one wrote
(`capsule.faults` names the points the crash tests kill at).
"""

from __future__ import annotations

from capsule.evidence.bundle import BundleResult, make_bundle
from capsule.evidence.signing import SigningKey, fingerprint_of
from capsule.faults import crash_point
from capsule.pipeline.opening import OpenRun
from capsule.prereg.ledger import Ledger
from capsule.report.document import write_report


def report_and_sign(
    run: OpenRun, *, plan_sha256: str, manifest_digest: str, key: SigningKey, ledger: Ledger | None
) -> BundleResult:
    """Write the run's report (stating the key's fingerprint), then sign and record its bundle;
    `ledger=None` signs without appending (a dry run)."""
    crash_point("before-report")
    write_report(run.path, fingerprint=fingerprint_of(key.public_key))
    crash_point("before-bundle")
    return make_bundle(
        run.path,
        run_id=run.run_id,
        plan_path=run.record.plan_path,
        plan_sha256=plan_sha256,
        manifest_digest=manifest_digest,
        ledger_head_at_start=run.record.ledger_head_at_start,
        key=key,
        ledger=ledger,
    )

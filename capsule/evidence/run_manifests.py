"""The manifests `capsule manifest diff` compares: a run directory's only once the run verifies.

A manifest file on its own (what `capsule manifest --out` writes on a machine) is a fingerprint,
read as it is and labelled unverified. A run directory's manifest is the signed fingerprint of the
machine that made the run, so the run is verified first exactly as `compare` verifies a side
(`capsule.evidence.compare.verify_side`: signature, every file, the ledger's trust rule, no dry run):
a run whose manifest was edited after signing, or that is not signed, is refused, not diffed.
With `--arm`, a run directory's side is the manifest of the machine that generated that arm: the
run's own, or the Ray node's it holds (`nodes/<digest>.json`, lanes on a cluster: docs/cluster.md),
as the arm's sidecar segments name it (verify has checked that the run holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError, VerificationError
from capsule.evidence.arm_machines import machine_manifest, one_machine
from capsule.evidence.compare import verify_side
from capsule.machine.manifest import load_manifest, manifest_digest
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class DiffSide:
    """One side of a manifest diff: the manifest, and one line saying why it can be believed."""

    manifest: dict[str, Any]
    trust: str


def diff_side(path: Path, ledger_path: Path, keys: Sequence[Path] = (), arm: str | None = None) -> DiffSide:
    """The manifest at `path` (a manifest file, or a run directory whose run must verify against
    `ledger_path`, `keys` pinned as `verify --key`; with `arm`, the manifest of the machine that
    generated that arm), with its trust line. VerificationError (exit 3) for an unsigned or failing
    run directory; BadInputError (exit 2) for a dry run, a bad file, or an `arm` it cannot answer."""
    if not path.is_dir():
        if arm is not None:
            raise BadInputError(f"{path}: --arm reads a run directory's arm records; give a run directory")
        return DiffSide(load_manifest(path), "a manifest file, not verified (a run directory's is)")
    run = RunDir(path)
    if not run.manifest.is_file():  # not a run directory at all: the reader's one-line refusal (exit 2)
        load_manifest(path)
    if not run.envelope.is_file():
        raise VerificationError(
            f"{path}: not signed (no {run.envelope.name}), so its manifest is not evidence of the machine "
            f"that made it; diff a signed run, or its manifest file as a plain file ({run.manifest})"
        )
    summary = verify_side(path, ledger_path, keys)
    trust = f"run {summary.run_id} verified, trusted {summary.trusted_by}"
    own = load_manifest(path)
    if arm is None:
        return DiffSide(own, trust)
    digest = one_machine(run, arm)
    if digest == manifest_digest(own):
        return DiffSide(own, f"{trust}; arm {arm} on the run's machine")
    return DiffSide(machine_manifest(run, digest), f"{trust}; arm {arm} on Ray node manifest {digest[:12]}")

"""Which machine generated each arm of a run: the run's own (`manifest.json`), or, for lanes on a
Ray cluster, the node whose manifest the run holds (`nodes/<digest>.json`), as the digests in the
arm's sidecar segments name it. `capsule verify` has checked that the run holds each one named;
`manifest diff --arm` and `compare` read them here.
"""

from __future__ import annotations

from typing import Any

from capsule.errors import BadInputError
from capsule.generation.arm_sidecar import ImportedSidecar, load_sidecar
from capsule.machine.manifest import load_manifest, manifest_digest
from capsule.run_dir import RunDir


def arm_digests(run: RunDir, arm: str) -> tuple[str, ...]:
    """The manifest digests of the machines that generated `arm` in `run`, sorted (one, unless its
    batch shares ran on several nodes). BadInputError for an arm the run lacks or imported samples."""
    path = run.generations_meta(arm)
    if not path.is_file():
        raise BadInputError(f"{run.path}: has no arm {arm!r} ({path.name} is missing); name one of its arms")
    sidecar = load_sidecar(path)
    if isinstance(sidecar, ImportedSidecar):
        raise BadInputError(f"{path}: imported samples, generated on no machine of this run's")
    return tuple(sorted({segment.manifest_digest for segment in sidecar.segments}))


def machine_manifest(run: RunDir, digest: str) -> dict[str, Any]:
    """The manifest of the machine with `digest` in `run`: its own, or a node's it holds."""
    own = load_manifest(run.path)
    return own if manifest_digest(own) == digest else load_manifest(run.node_manifest(digest))


def one_machine(run: RunDir, arm: str) -> str:
    """The digest of the one machine that generated `arm`; BadInputError naming them when several did."""
    digests = arm_digests(run, arm)
    if len(digests) > 1:
        listed = ", ".join(digest[:12] for digest in digests)
        raise BadInputError(
            f"{run.generations_meta(arm)}: arm {arm} was generated on {len(digests)} machines ({listed}); "
            f"diff their manifests as files ({run.path.name}/nodes/<digest>.json, or manifest.json)"
        )
    return digests[0]

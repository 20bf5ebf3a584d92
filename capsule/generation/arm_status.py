"""Whether an arm is complete, read from its sidecar once it has run: the arm runner, the generate
stage and a finished run's checks all ask here (`capsule.generation.store.ArmStore.complete`
answers while it runs)."""

from __future__ import annotations

from capsule.errors import CapsuleError
from capsule.generation.arm_sidecar import COMPLETE, load_sidecar
from capsule.run_dir import RunDir


def recorded_status(run: RunDir, arm_name: str) -> str | None:
    """The status an arm's sidecar records ("running", "partial", "complete"); None when there is no
    sidecar or it cannot be read (opening the arm's store says why)."""
    path = run.generations_meta(arm_name)
    try:
        return load_sidecar(path).status if path.is_file() else None
    except (OSError, CapsuleError):
        return None


def arm_done(run: RunDir, arm_name: str) -> bool:
    """Whether an arm's sidecar says it is complete (then nothing is left to generate, and no
    backend need be loaded for it)."""
    return recorded_status(run, arm_name) == COMPLETE

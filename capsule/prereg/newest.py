"""The newest sealed plan of a model: read from the ledger, the one place that says which plans are
sealed and which amendments supersede them (what the GPU image's `reproduce` runs without --plan)."""

from __future__ import annotations

from pathlib import Path

from capsule.errors import BadInputError, CapsuleError
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import AmendEntry, SealEntry
from capsule.prereg.loader import load_plan


def newest_plan(ledger: Ledger, model_name: str) -> str:
    """The repo-relative directory of the latest sealed or amended plan of `model_name` (its `[model]
    name` or hub repo) that no amendment supersedes; BadInputError when the ledger holds none."""
    for entry in reversed(ledger.entries):
        path = entry.path
        if not isinstance(entry, (SealEntry, AmendEntry)) or not path.endswith("/plan.toml"):
            continue
        if ledger.superseded_by(path) is not None:
            continue
        try:
            model = load_plan(ledger.root / path).model
        except CapsuleError:
            continue  # a sealed plan that no longer parses is not a plan to run
        if model_name in (model.name, model.repo):
            return str(Path(path).parent)
    raise BadInputError(
        f"{ledger.path}: no sealed, unsuperseded plan of model {model_name!r}; name one with --plan"
    )

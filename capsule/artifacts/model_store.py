"""Resolve a plan's model to a verified local directory, before anything loads it.

source "embedded": the capsule's own SmolLM2 directory (`capsule.artifacts.embedded_model.fetch_model`).
source "path" / "hub": a directory given with `--model-dir`, else `$CAPSULE_MODELS/<repo name>`, else
`models/<repo name>` in the working directory (where `capsule fetch --plan` puts it; docs/gpu-host.md).
Either way the plan's pinned `model.files` sha256s are checked first, and `capsule-model.json` too
when the directory has one; any difference is a VerificationError and nothing is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from capsule.artifacts.embedded_model import MODEL_RECORD, fetch_model, verify_model_dir
from capsule.artifacts.hub import fetch_hub_model
from capsule.artifacts.model_files import pinned_paths
from capsule.errors import BadInputError, UnavailableError, VerificationError
from capsule.hashing import sha256_file
from capsule.prereg.plan import Model

MODELS_ENV = "CAPSULE_MODELS"
DEFAULT_MODELS_ROOT = Path("models")  # `capsule fetch --plan` writes models/<repo name> (docs/gpu-host.md)


def local_model_dir(model: Model) -> tuple[Path, str]:
    """Where a path / hub model's weights are looked for without `--model-dir`, and why there:
    `$CAPSULE_MODELS/<repo name>`, else `models/<repo name>` under the working directory."""
    root = os.environ.get(MODELS_ENV)
    how = f"${MODELS_ENV}" if root else f"{DEFAULT_MODELS_ROOT}/, as ${MODELS_ENV} is unset"
    name = model.repo.split("/")[-1] if model.repo else model.name
    return Path(root or DEFAULT_MODELS_ROOT) / name, how


def verify_pinned_files(directory: Path, files: dict[str, str]) -> None:
    """Check each pinned relative path's sha256 (the plan's `model.files`)."""
    paths = pinned_paths(directory, files)
    for name, expected in sorted(files.items()):
        path = paths[name]
        if not path.is_file():
            raise VerificationError(f"{path}: missing (pinned in the plan's model.files)")
        actual = sha256_file(path)
        if actual != expected:
            raise VerificationError(f"{path}: sha256 {actual}, the plan pins {expected}")


def verify_local_dir(directory: Path) -> None:
    """A directory given by the user: it must exist; its `capsule-model.json`, if any, must match."""
    if not directory.is_dir():
        raise BadInputError(
            f"{directory}: model directory not found; download the weights there (README.md shows how), "
            f"pass --model-dir, or set ${MODELS_ENV}"
        )
    if (directory / MODEL_RECORD).exists():
        verify_model_dir(directory)


def model_store_dir(model: Model, model_dir: Path | None = None) -> Path:
    """Where a path or hub model lives here: `model_dir` when given, else `local_model_dir(model)`;
    `capsule fetch --plan` downloads hub models there."""
    return (model_dir if model_dir is not None else local_model_dir(model)[0]).expanduser()


def resolve_model_dir(model: Model, model_dir: Path | None = None) -> Path:
    """The verified local directory holding `model` (VerificationError before any load on a mismatch)."""
    if model.source == "embedded" and model_dir is None:
        directory, _source = fetch_model()  # verifies every file against capsule-model.json
    elif model.source in ("embedded", "path", "hub"):
        directory = model_store_dir(model, model_dir)
        verify_local_dir(directory)
    else:
        raise BadInputError(f"model source must be 'embedded', 'path' or 'hub', not {model.source!r}")
    if not model.files:
        raise BadInputError(f"model {model.name!r}: the plan pins no model.files sha256s")
    verify_pinned_files(directory, model.files)
    return directory


def fetch_plan_model(model: Model, model_dir: Path | None, say: Callable[[str], None]) -> str:
    """Fetch (hub: at the pinned revision, into its store directory) or verify (embedded, path) a
    plan's model; one line saying what was done (`capsule fetch model --plan`)."""
    if model.source == "hub":
        target = model_store_dir(model, model_dir)
        downloaded = fetch_hub_model(model, target, say=say)
        verified = resolve_model_dir(model, target)
        how = f"downloaded {len(downloaded)} file(s) at {model.revision}" if downloaded else "already present"
        return f"model: {verified} ({model.repo}, {how}; every pinned sha256 verified)"
    directory = resolve_model_dir(model, model_dir)
    return f"model: {directory} (source {model.source}; every pinned sha256 verified)"


def missing_pinned(model: Model, model_dir: Path | None = None) -> list[str]:
    """The plan's pinned model files that its store directory lacks (present files are not hashed
    here: `resolve_model_dir` checks every sha256 before anything loads)."""
    directory = model_store_dir(model, model_dir)
    paths = pinned_paths(directory, model.files)
    return sorted(name for name in model.files if not paths[name].is_file())


def ensure_model_dir(model: Model, model_dir: Path | None, plan: Path, say: Callable[[str], None]) -> Path:
    """`resolve_model_dir`, after fetching a hub model's missing pinned files at the plan's revision
    (what `capsule reproduce` does, so its one command runs a study on a host with network). With no
    network, one UnavailableError line (exit 2) naming `capsule fetch model --plan` and the directory
    the weights belong in; nothing half-written enters it (the download is staged beside it)."""
    if model.source == "hub" and model.files:
        missing = missing_pinned(model, model_dir)
        if missing:
            target = model_store_dir(model, model_dir)
            say(f"model: {target} lacks {len(missing)} of the plan's {len(model.files)} pinned files; "
                f"fetching them from {model.repo}@{model.revision}")
            try:
                say(fetch_plan_model(model, model_dir, say))
            except UnavailableError as error:
                raise UnavailableError(
                    f"{error}. Or fetch the weights where there is network, `capsule fetch model --plan "
                    f"{plan}`, and put them in {target} (the study volume's models/, or $CAPSULE_MODELS)"
                ) from error
    return resolve_model_dir(model, model_dir)

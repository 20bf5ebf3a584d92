"""Which model class a checkpoint needs, and whether it agrees with the plan's [model] loader.

A plan seals `[model] loader` ("causal_lm" | "image_text_to_text", see
`capsule.prereg.backend_specs.MODEL_LOADERS`). hf loads the model with the auto class the loader
names; vLLM picks its model class from config.json itself. Both call `resolve_loader` before any
weights load, so a plan that names one class for a checkpoint built for the other is refused rather
than quietly loaded some other way. Arms without a plan (ad hoc) pass None and get the checkpoint's.
"""

from __future__ import annotations

from pathlib import Path

from capsule.errors import BadInputError
from capsule.jsonio import read_json
from capsule.prereg.backend_specs import MODEL_LOADERS


def architectures(model_dir: Path) -> list[str]:
    """config.json's `architectures` (empty when the file or the field is missing)."""
    path = model_dir / "config.json"
    if not path.exists():
        return []
    config = read_json(path, "model config.json")
    names = config.get("architectures") if isinstance(config, dict) else None
    return [str(name) for name in names or []]


def checkpoint_loader(model_dir: Path) -> str | None:
    """The loader config.json's architecture calls for: image_text_to_text for multimodal
    `...ForConditionalGeneration` checkpoints (e.g. Qwen3.5 derivatives), causal_lm for
    `...ForCausalLM`; None when config.json does not say (no architectures, or another kind)."""
    names = architectures(model_dir)
    if any(name.endswith("ForConditionalGeneration") for name in names):
        return "image_text_to_text"
    if any(name.endswith("ForCausalLM") for name in names):
        return "causal_lm"
    return None


def resolve_loader(model_dir: Path, loader: str | None) -> str:
    """The loader to use for `model_dir`: the plan's `loader` once config.json agrees with it, or, for
    an arm without a plan (None), the checkpoint's own (causal_lm when config.json does not say).

    Raises BadInputError naming both when the plan's loader and config.json's architecture disagree.
    """
    found = checkpoint_loader(model_dir)
    if loader is None:
        return found or "causal_lm"
    if loader not in MODEL_LOADERS:
        known = ", ".join(MODEL_LOADERS)
        raise BadInputError(f"unknown [model] loader {loader!r}; known: {known}")
    if found is not None and found != loader:
        raise BadInputError(
            f"the plan's [model] loader is {loader!r} ({MODEL_LOADERS[loader]}), but "
            f"{model_dir / 'config.json'} declares architecture {', '.join(architectures(model_dir))}, "
            f"which needs loader {found!r} ({MODEL_LOADERS[found]}): the plan names the wrong model "
            "class for this checkpoint (amend the plan) or the model directory is not the plan's model"
        )
    return loader

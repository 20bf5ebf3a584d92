"""Which files of a model a plan pins, which the standard plan needs, and what their configs say.

A plan pins every top-level file that can change outputs: weights (safetensors only: pickled
weights run code when loaded), their index, configs, tokenizer files and the chat template;
docs, images and other formats are left out. The same rule picks the files `capsule plan new`
hashes in a local directory, the files it reads from the hub, and so the files `capsule fetch
--plan` downloads. The standard plan also reads the model's dtype, context length and sampling
defaults from config.json and generation_config.json.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.embedded_model import MODEL_RECORD
from capsule.errors import BadInputError
from capsule.hashing import sha256_file
from capsule.jsonio import read_json
from capsule.prereg.plan import DTYPES
from capsule.run_dir import model_file_problem

PINNED_PATTERNS = ("*.safetensors", "*.json", "*.jinja", "*.model", "*.tiktoken", "merges.txt", "vocab.txt")
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")  # read, not only hashed
# The files a loader reads besides the weights, by the plan's [model] loader: each alternative set is
# enough (the first is named when none is there). The seed took its stop tokens from
# generation_config.json, so it is required too; an image-text-to-text checkpoint is loaded with its
# processor, whose image-processor config transformers reads even for text-only prompts.
LOADER_FILES: dict[str, tuple[tuple[str, ...], ...]] = {
    "causal_lm": (("config.json",), ("tokenizer_config.json",), ("generation_config.json",)),
    "image_text_to_text": (
        ("config.json",),
        ("tokenizer_config.json",),
        ("generation_config.json",),
        ("preprocessor_config.json", "processor_config.json"),
    ),
}


def missing_loader_file(names: Iterable[str], loader: str) -> str | None:
    """The first file the `loader` reads that `names` lacks (None when nothing is missing)."""
    present = set(names)
    for alternatives in LOADER_FILES.get(loader, ()):
        if not present & set(alternatives):
            return alternatives[0]
    return None
# Sampling when generation_config.json gives none: plain sampling at temperature 1 (no truncation).
SAMPLING_FALLBACK: dict[str, float | int] = {"temperature": 1.0, "top_p": 1.0, "top_k": 0}


def pinned_paths(directory: Path, files: Iterable[str]) -> dict[str, Path]:
    """Each pinned file name joined to the model's `directory`, checked before anything is read,
    renamed or written there: a name must be a plain file name (`capsule.run_dir.model_file_problem`),
    so a plan whose `[model.files]` names `/any/file` or `../../x` never reaches outside the directory
    (the plan loader refuses such a plan too; this is the check where the files are touched)."""
    paths = {}
    for name in files:
        problem = model_file_problem(name)
        if problem is not None:
            raise BadInputError(f"{directory}: model file {problem}; fix the plan's [model.files]")
        paths[name] = directory / name
    return paths


def pinned_names(names: Iterable[str]) -> list[str]:
    """The top-level file names, of `names`, that a plan pins (sorted)."""
    return sorted(
        name
        for name in names
        if "/" not in name
        and name != MODEL_RECORD
        and any(fnmatch.fnmatchcase(name, pattern) for pattern in PINNED_PATTERNS)
    )


def _needs(names: set[str], chat_template_inline: bool) -> list[str]:
    """What the standard plan needs that `names` lacks, each with why."""
    lacking = []
    if "config.json" not in names:
        lacking.append("config.json (the model's architecture, dtype and context)")
    if "tokenizer_config.json" not in names:
        lacking.append("tokenizer_config.json (the tokenizer's settings)")
    if not names & {"tokenizer.json", "tokenizer.model"} and not {"vocab.json", "merges.txt"} <= names:
        lacking.append("tokenizer.json or tokenizer.model (the tokenizer)")
    if not any(name.endswith(".safetensors") for name in names):
        lacking.append("*.safetensors weights (pickled .bin weights are refused: loading them runs code)")
    if "chat_template.jinja" not in names and not chat_template_inline:
        lacking.append("a chat template (chat_template.jinja, or chat_template in tokenizer_config.json)")
    return lacking


def check_needed_files(names: Iterable[str], config_dir: Path, where: str) -> None:
    """Refuse a model that lacks a file the standard plan needs (BadInputError naming each and the fix).
    `config_dir` holds its small files (tokenizer_config.json is read for an inline chat template)."""
    present = set(names)
    inline = (
        "chat_template" in _json(config_dir / "tokenizer_config.json")
        if "tokenizer_config.json" in present
        else False
    )
    lacking = _needs(present, inline)
    if lacking:
        raise BadInputError(
            f"{where}: missing {'; '.join(lacking)}; give the model's complete directory "
            "(as downloaded from its hub repository)"
        )


def hash_pinned_files(directory: Path) -> dict[str, str]:
    """sha256 of every file of a local model directory that a plan pins, by name."""
    names = pinned_names(path.name for path in directory.iterdir() if path.is_file())
    return {name: sha256_file(directory / name) for name in names}


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = read_json(path, "model config")
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class ModelConfig:
    """What the standard plan reads from a model's configs."""

    dtype: str | None  # bfloat16 | float16 | float32, or None when config.json does not say
    context: int | None  # max_position_embeddings
    sampling: dict[str, float | int]  # temperature, top_p, top_k, repetition_penalty


def read_model_config(config_dir: Path) -> ModelConfig:
    """The dtype, context length and sampling defaults of the model whose configs are in `config_dir`
    (a multimodal config's `text_config` is read where the top level does not say)."""
    config = _json(config_dir / "config.json")
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}
    dtype = next((v for c in (config, text) for k in ("dtype", "torch_dtype") if (v := c.get(k))), None)
    context = next(
        (c["max_position_embeddings"] for c in (config, text) if "max_position_embeddings" in c), None
    )
    generation = _json(config_dir / "generation_config.json")
    sampling: dict[str, float | int] = dict(SAMPLING_FALLBACK)
    if isinstance(generation.get("temperature"), int | float) and generation["temperature"] > 0:
        sampling["temperature"] = float(generation["temperature"])
    if isinstance(generation.get("top_p"), int | float) and 0 < generation["top_p"] <= 1:
        sampling["top_p"] = float(generation["top_p"])
    if isinstance(generation.get("top_k"), int) and generation["top_k"] >= 0:
        sampling["top_k"] = int(generation["top_k"])
    if isinstance(generation.get("repetition_penalty"), int | float) and generation["repetition_penalty"] > 0:
        sampling["repetition_penalty"] = float(generation["repetition_penalty"])
    return ModelConfig(
        dtype=dtype if dtype in DTYPES else None,
        context=context if isinstance(context, int) and context > 0 else None,
        sampling=sampling,
    )

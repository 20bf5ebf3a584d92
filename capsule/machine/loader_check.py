"""What `capsule doctor --plan` loads without weights: the files a backend reads before the weights.

transformers reads config.json, the tokenizer files, generation_config.json (the stop tokens) and,
for an image-text-to-text checkpoint (the plan's `[model] loader`), the processor's configs. Each is
loaded here with the plan's loader in mind and no weights, so a snapshot that lacks one, or a host
that lacks a package one needs (Qwen3.5's video processor needs torchvision), is named in one line
before a GPU-hour is spent. transformers is imported on first use (doctor's other checks stay light).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.model_files import missing_loader_file


@dataclass(frozen=True)
class LoaderCheck:
    """What loaded (the classes, in order) and the first problem, in one line ("" when none)."""

    loaded: tuple[str, ...]
    problem: str


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


def check_loadable(directory: Path, loader: str) -> LoaderCheck:
    """Load `directory`'s config, tokenizer, generation config and (image_text_to_text) processor,
    no weights; the first file missing or failing to load is the problem."""
    names = {path.name for path in directory.iterdir() if path.is_file()}
    lacking = missing_loader_file(names, loader)
    if lacking is not None:
        return LoaderCheck((), f"{directory}: no {lacking}, which the {loader} loader reads")
    import transformers

    steps: list[tuple[str, Any]] = [
        ("config.json", transformers.AutoConfig),
        ("the tokenizer files", transformers.AutoTokenizer),
        ("generation_config.json", transformers.GenerationConfig),
    ]
    if loader == "image_text_to_text":
        steps.append(("the processor configs", transformers.AutoProcessor))
    loaded: list[str] = []
    for what, cls in steps:
        try:
            loaded.append(type(cls.from_pretrained(str(directory))).__name__)
        except Exception as error:  # transformers raises OSError, ValueError, ImportError, KeyError...
            return LoaderCheck(tuple(loaded), f"{directory}: {what} do(es) not load: {_one_line(error)}")
    return LoaderCheck(tuple(loaded), "")

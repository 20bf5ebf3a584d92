"""Test-only loader of the parity reference: Google's IFEval code as shipped in `lm-eval==0.4.13`.

Its package `__init__` pulls in `datasets` and the whole harness, so the three ifeval modules are
loaded from their files under stand-in parent packages, without executing any parent `__init__`.
NLTK is pointed at our materialized `punkt_tab` first, and `nltk.download` is disabled while the
modules load, so the reference can never reach the network. Nothing here is copied into the project.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ifeval_scorer import Prompt

_PARENTS = ("lm_eval", "lm_eval.tasks", "lm_eval.tasks.ifeval")
_MODULES = ("instructions_util", "instructions", "instructions_registry", "utils")


@dataclass(frozen=True)
class Reference:
    """The loaded reference modules."""

    util: types.ModuleType
    instructions: types.ModuleType
    registry: types.ModuleType
    evaluation: types.ModuleType  # lm_eval/tasks/ifeval/utils.py: strict and loose passes


@contextmanager
def _no_downloads() -> Iterator[None]:
    import nltk

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"the reference tried nltk.download{args}: punkt_tab should have been found")

    saved = nltk.download
    nltk.download = refuse
    try:
        yield
    finally:
        nltk.download = saved


@lru_cache(maxsize=1)
def load_reference() -> Reference:
    """Load (once) lm-eval's ifeval modules from the installed wheel, without its package `__init__`."""
    from ifeval_scorer.nltk_data import ensure_nltk_data

    ensure_nltk_data()
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("lm-eval is not installed: pip install --no-deps lm-eval==0.4.13")
    root = Path(next(iter(spec.submodule_search_locations)))
    if "lm_eval" in sys.modules and not getattr(sys.modules["lm_eval"], "__capsule_stub__", False):
        raise RuntimeError("the real lm_eval package is already imported; load the reference first")
    directory = root
    for index, name in enumerate(_PARENTS):
        if index:
            directory = directory / name.rsplit(".", 1)[1]
        if name not in sys.modules:
            stub = types.ModuleType(name)
            stub.__path__ = [str(directory)]
            stub.__capsule_stub__ = True  # type: ignore[attr-defined]
            sys.modules[name] = stub
    loaded: dict[str, types.ModuleType] = {}
    with _no_downloads():
        for short in _MODULES:
            full = f"lm_eval.tasks.ifeval.{short}"
            if full not in sys.modules:
                module_spec = importlib.util.spec_from_file_location(full, directory / f"{short}.py")
                assert module_spec is not None and module_spec.loader is not None
                module = importlib.util.module_from_spec(module_spec)
                sys.modules[full] = module
                module_spec.loader.exec_module(module)
                setattr(sys.modules["lm_eval.tasks.ifeval"], short, module)
            loaded[short] = sys.modules[full]
    return Reference(loaded["instructions_util"], loaded["instructions"], loaded["instructions_registry"],
                     loaded["utils"])


def _example(reference: Reference, prompt: Prompt) -> Any:
    return reference.evaluation.InputExample(
        key=prompt.key,
        instruction_id_list=list(prompt.instruction_id_list),
        prompt=prompt.prompt,
        kwargs=[dict(kwargs) for kwargs in prompt.kwargs],
    )


def seed_globals(seed: int) -> None:
    """The seeding protocol, applied to the reference's global state."""
    import langdetect

    random.seed(seed)
    langdetect.DetectorFactory.seed = seed


def reference_verdicts(prompt: Prompt, response: str, seed: int) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """(strict, loose) per-instruction verdicts of the reference, seeded before each pass."""
    reference = load_reference()
    example = _example(reference, prompt)
    seed_globals(seed)
    strict = reference.evaluation.test_instruction_following_strict(example, response)
    seed_globals(seed)
    loose = reference.evaluation.test_instruction_following_loose(example, response)
    return tuple(strict.follow_instruction_list), tuple(loose.follow_instruction_list)


def reference_unseeded(prompt: Prompt, response: str) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """(strict, loose) verdicts of the reference as it runs upstream: nothing seeded."""
    import langdetect

    reference = load_reference()
    example = _example(reference, prompt)
    langdetect.DetectorFactory.seed = None
    random.seed()
    strict = reference.evaluation.test_instruction_following_strict(example, response)
    loose = reference.evaluation.test_instruction_following_loose(example, response)
    return tuple(strict.follow_instruction_list), tuple(loose.follow_instruction_list)


@contextmanager
def preserved_global_random() -> Iterator[None]:
    """Restore `random`'s global state and langdetect's factory seed after seeding the reference."""
    import langdetect

    state = random.getstate()
    saved_seed = langdetect.DetectorFactory.seed
    try:
        yield
    finally:
        random.setstate(state)
        langdetect.DetectorFactory.seed = saved_seed


def fixture_pairs(path: Path, prompts: dict[int, Prompt]) -> list[tuple[Prompt, str]]:
    """(prompt, response) for each row of a Google response file, matched to keys by prompt text."""
    import json

    by_text = {prompt.prompt: prompt for prompt in prompts.values()}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(by_text[row["prompt"]], row["response"]) for row in rows]

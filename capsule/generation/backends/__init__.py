"""Generation backends: a small protocol, and loading a backend by name from its declaration.

Each backend is declared once in `capsule.prereg.backend_specs.SPECS` (its class as "module:Class",
the packages it needs, its options with types and defaults); the plan loader validates arms from
the same table.

A backend turns token-id requests into completions under given decoding settings. It never renders
chat templates or decodes text: `capsule.generation.chat` does both once, so every backend sees
identical input ids and its output is decoded by one tokenizer. torch / transformers / vllm are
imported only when the backend named in an arm is loaded, so the fake backend and the CLI stay light.

Backends differ in how much of an arm one `generate` call takes (`Backend.scope`):
"batch" (hf: exactly one formed batch per call) or "arm" (vllm: every remaining request of the arm
at once, with `on_done` called as each request finishes so completed batches are written early).

Every backend is constructed the same way, `Class(model_dir, arm, loader, context)`, and records at
construction what it was loaded for (`loaded_for`, the arm's `reuse_key`). `BackendSlot` is the one
place the capsule loads a backend: an arm asks it for one when it has batches left to generate.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from capsule.errors import BadInputError, CapsuleError, UnavailableError
from capsule.generation.refusals import BackendRefusedError, refusal_evidence, refusal_of
from capsule.prereg.backend_options import resolved_options
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.backend_types import BackendOptions
from capsule.prereg.engine_sharing import reuse_key
from capsule.run_dir import RunDir

if TYPE_CHECKING:
    from capsule.prereg.plan import Arm, Decoding

OptionsT = TypeVar("OptionsT", bound=BackendOptions)


class BackendOutOfMemoryError(CapsuleError):
    """The backend ran out of memory; the batch size is reported and never reduced silently."""
    exit_code = 2


@dataclass(frozen=True)
class Request:
    """One prompt to complete: its key and the token ids `capsule.generation.chat` rendered for it.
    `text` is the user prompt itself, for a backend whose protocol renders the template on the
    other side (the server backend's chat API); every other backend reads only the ids."""
    key: int
    input_ids: tuple[int, ...]
    text: str = ""


@dataclass(frozen=True)
class Completion:
    """A backend's answer to one request: generated ids (stop token included) and why it stopped.

    `request` is what a backend that sends requests one by one observed about this one (the server
    backend: send, first-token and finish times, requests in flight at send, the seed sent, usage,
    attempts); the row records it as its `request` field. None for backends without per-request
    timing (their rows have no such field, as rows written before it existed).
    """
    token_ids: tuple[int, ...]
    finish_reason: Literal["stop", "length"]
    request: Mapping[str, Any] | None = None


#: The environment variable an endpoint's API key is read from, unless `--endpoint-key-env` names another.
ENDPOINT_KEY_ENV = "CAPSULE_ENDPOINT_KEY"


@dataclass(frozen=True)
class BackendContext:
    """Where a backend runs, beyond the arm: the run directory (a launched server keeps its command
    line, log and pid there) and an endpoint the user gave (`--endpoint`) instead of launching one."""
    run: RunDir | None = None
    endpoint: str | None = None  # an OpenAI-compatible base URL, e.g. http://host:8000/v1
    key_env: str = ENDPOINT_KEY_ENV  # the environment variable holding its API key (never written)


DoneCallback = Callable[[int, Completion], None]


@runtime_checkable
class Backend(Protocol):
    """What `capsule.generation.arm_runner` needs from a backend."""
    name: str
    scope: Literal["batch", "arm"]
    loaded_for: tuple[Any, ...]  # the reuse key of the arm it was constructed for (`reuse_key`)

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


def arm_options(backend: str, arm: Arm, kind: type[OptionsT]) -> OptionsT:
    """The options `backend` runs `arm` with, as its options dataclass `kind`: its declared defaults
    overlaid with the arm's backend_options, each checked against `capsule.prereg.backend_specs`."""
    options = resolved_options(backend, arm.backend_options, f"arm {arm.name!r}.backend_options")
    if not isinstance(options, kind):
        raise TypeError(f"backend {backend!r} declares {type(options).__name__} options, not {kind.__name__}")
    return options


def check_backend(name: str) -> None:
    """Fail early and clearly (before any model loads) if `name` is unknown or its packages are missing."""
    spec = SPECS.get(name)
    if spec is None:
        known = ", ".join(sorted(SPECS))
        raise BadInputError(f"unknown backend {name!r}; known backends: {known}")
    for package in spec.requires:
        if importlib.util.find_spec(package) is None:
            raise UnavailableError(f"backend {name!r} needs the {package} package ({spec.hint})")


def backend_class(name: str) -> type:
    """The class `SPECS[name].target` names, imported now (this is what makes the registry lazy)."""
    module_name, attribute = SPECS[name].target.split(":")
    cls = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(cls, type):
        raise TypeError(f"{SPECS[name].target} is not a class")
    return cls


def load_backend(
    name: str, model_dir: Path, arm: Arm, loader: str | None = None, context: BackendContext | None = None
) -> Backend:
    """Load backend `name` for `arm`'s load-time settings (see `reuse_key`) from a verified model dir.

    `loader` is the plan's [model] loader: the backend loads that model class and refuses a
    checkpoint whose config.json needs the other (`checkpoint.resolve_loader`). None is for arms
    without a plan: the checkpoint's config.json decides, and the backend records what it used.
    `context`: where it runs (the server backend keeps its files in the run, or uses an endpoint).
    An error that is one of the backend's declared refusals (`capsule.generation.refusals`) is
    raised as `BackendRefusedError` with the engine's own message; any other propagates unchanged.
    """
    check_backend(name)
    cls = backend_class(name)
    try:
        backend = cls(model_dir, arm, loader, context or BackendContext())
    except Exception as error:
        refused = refusal_of(name, error, dataclasses.asdict(arm))
        if refused is None:
            raise
        raise BackendRefusedError(
            arm.name, name, refused.message, refused.refusal.why, refused=refused, log=refusal_evidence(error)
        ) from error
    assert isinstance(backend, Backend)
    return backend


def check_reusable(backend: Backend, arm: Arm) -> None:
    """Refuse to run `arm` on a backend loaded for other load-time settings (see `reuse_key`)."""
    if backend.loaded_for != reuse_key(arm):
        raise BadInputError(
            f"arm {arm.name!r}: the backend passed in was loaded for {backend.loaded_for}, the arm needs "
            f"{reuse_key(arm)}; load a new one with capsule.generation.backends.load_backend"
        )


class BackendSlot:
    """At most one loaded backend, and the one place the capsule loads one (`load_backend`).

    An arm asks for a backend (`for_arm`) only when it has batches left to generate, after all its
    validation; the one loaded serves it if it was loaded for the arm's `reuse_key`, else it is
    closed first and another loaded. So consecutive arms with equal keys share one model, an arm
    already complete loads nothing, and `close()` frees whatever is loaded. `announce(arm)` is called
    just before each load (the pipeline prints "loading backend ..."), `loaded(arm, seconds)` after
    each load that succeeded (a probe measures backend starts with it).
    """

    def __init__(
        self, context: BackendContext | None = None, announce: Callable[[Arm], None] | None = None,
        loaded: Callable[[Arm, float], None] | None = None,
    ) -> None:
        self.context = context or BackendContext()
        self.announce = announce
        self.loaded = loaded
        self.backend: Backend | None = None

    def for_arm(self, arm: Arm, model_dir: Path, loader: str | None) -> Backend:
        """A backend loaded for `arm`'s load-time settings: the one held, or a new one in its place."""
        if self.backend is not None and self.backend.loaded_for != reuse_key(arm):
            self.close()
        if self.backend is None:
            if self.announce is not None:
                self.announce(arm)
            started = time.monotonic()
            self.backend = load_backend(arm.backend, model_dir, arm, loader, self.context)
            if self.loaded is not None:
                self.loaded(arm, time.monotonic() - started)
        return self.backend

    def close(self) -> None:
        """Close the backend held, if any (the slot can load another afterwards)."""
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()


__all__ = [
    "Backend",
    "BackendContext",
    "BackendOutOfMemoryError",
    "BackendRefusedError",
    "BackendSlot",
    "Completion",
    "DoneCallback",
    "ENDPOINT_KEY_ENV",
    "Request",
    "arm_options",
    "backend_class",
    "check_backend",
    "check_reusable",
    "load_backend",
    "reuse_key",
]

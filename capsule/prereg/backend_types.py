"""The types each generation backend is declared with (`capsule.prereg.backend_specs` declares them):
an option (`Option`, read from a field `Annotated[type, Why(...)] = default`), a backend's options
(`BackendOptions`, one frozen dataclass per backend, its table read once from its fields), a start-up
error that means "this setting is refused" (`Refusal`, answering an `ArmSetting`), and a backend
itself (`BackendSpec`). Plain data: nothing here imports a backend's packages.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self, TypeAlias, Union

Scope: TypeAlias = Literal["batch", "arm"]  # how much of an arm one `generate` call takes
# What computes a backend's tokens: its memory model, its stand-in model, and whether its batches are
# fixed in advance (transformers: static batches, independent, each a model step at a time) or formed
# by the engine's scheduler (vLLM, also behind the launched server); "none": no model (the fake one).
Engine: TypeAlias = Literal["transformers", "vllm", "none"]


@dataclass(frozen=True)
class Why:
    """What an options dataclass's field annotation says beside its type and default: why the option
    exists (what None means), whether a plan must set it, and the bounds of a number."""

    why: str
    required: bool = False
    bounds: tuple[float, float] | None = None


@dataclass(frozen=True)
class Option:
    """One backend option as the loader checks it, read from its options dataclass's field: its type,
    the value used when an arm leaves it out, and why.

    `default` None means the library's own default (the backend records the value it resolved).
    A `required` option can change results, so a plan must set it; its `default` then serves only
    arms built without a plan (`capsule generate` ad hoc, benchmarks). `bounds` are generous: they
    stop a size that would ask for terabytes before the backend tries to allocate it. `choices`
    come from a `Literal` type.
    """

    type: type
    why: str
    default: object = None
    required: bool = False
    choices: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None  # inclusive range of a number (sizes and counts drive memory)


def _option(hint: Any, default: object) -> Option:
    """The `Option` an `Annotated[type, Why(...)]` field declares (`T | None`: type T, default None)."""
    base, *extras = typing.get_args(hint)
    why = next(extra for extra in extras if isinstance(extra, Why))
    if typing.get_origin(base) in (Union, types.UnionType):
        base = next(arg for arg in typing.get_args(base) if arg is not type(None))
    choices: tuple[str, ...] = ()
    if typing.get_origin(base) is Literal:
        choices = typing.get_args(base)
        base = type(choices[0])
    return Option(base, why.why, default, why.required, choices, why.bounds)


@dataclass(frozen=True)
class BackendOptions:
    """The base of each backend's options: one frozen dataclass per backend, each field annotated
    `Annotated[type, Why(...)]` with its default, built once from an arm's checked `backend_options`
    (`resolved_options`). The plan loader's table of options (`table`) is read from the fields, so
    an option is added, typed or defaulted in exactly one place."""

    @classmethod
    def table(cls) -> dict[str, Option]:
        """Every option, by name, as the loader checks it (read from the fields, once per class)."""
        return dict(_table(cls))

    def to_json(self) -> dict[str, object]:
        """The options as plain data, every one with its value (what a backend's describe() records)."""
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}

    def only(self, kind: type[BackendOptions]) -> dict[str, object]:
        """The options `kind` declares (a part of these), as plain data."""
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(kind)}

    @classmethod
    def build(cls, checked: Mapping[str, object]) -> Self:
        """These options from `checked` values (`check_options`), declared defaults for the rest."""
        return cls(**checked)


_TABLES: dict[type[BackendOptions], dict[str, Option]] = {}  # each options class's table, read once


def _table(kind: type[BackendOptions]) -> dict[str, Option]:
    if kind not in _TABLES:
        hints = typing.get_type_hints(kind, include_extras=True)
        fields = dataclasses.fields(kind)
        _TABLES[kind] = {item.name: _option(hints[item.name], item.default) for item in fields}
    return _TABLES[kind]


@dataclass(frozen=True)
class Refusal:
    """An error a backend's engine raises at start-up for a setting it does not support: the arm is
    then recorded as refused (a result), not a crash. Matched narrowly: the exception's class name
    and a regular expression searched in its message (or, for an engine that starts in a child
    process, in the start-up log it wrote: `log = True`)."""

    exception: str  # the class name, e.g. "RuntimeError" (any module)
    pattern: str  # searched (re.search) in the message; the matching line is what gets recorded
    why: str  # what the setting is and where the engine raises it
    log: bool = False  # also searched in the engine's start-up log (a child process raised it)
    when: ArmSetting | None = None  # the arm setting it answers (None: any arm of the backend)

    def applies_to(self, arm: Mapping[str, Any]) -> bool:
        """Whether an arm (as plain data, `dataclasses.asdict(Arm)`) has the setting this refusal
        answers: an engine refuses what it was asked for, so a record of this refusal for an arm
        without that setting is not the engine's answer (a refusal record is checked with this)."""
        return self.when is None or self.when.holds(arm)


@dataclass(frozen=True)
class ArmSetting:
    """An arm setting a declared refusal answers: the value at a dotted path of the arm's plain data
    (`env.VLLM_BATCH_INVARIANT`, `dtype`, `backend_options.device`), matched whole by `value` (a
    regular expression) as text; an absent or None value never holds."""

    path: str
    value: str

    def holds(self, arm: Mapping[str, Any]) -> bool:
        """Whether `arm` has this setting."""
        current: Any = arm
        for part in self.path.split("."):
            current = current.get(part) if isinstance(current, Mapping) else None
        return current is not None and re.fullmatch(self.value, str(current)) is not None

    def describe(self) -> str:
        """The setting in words, for an error naming why a refusal does not apply."""
        return f"{self.path} matching {self.value!r}"


@dataclass(frozen=True)
class BackendSpec:
    """A backend: its class ("module:Class", imported lazily), the packages it needs, its options
    dataclass, how much of an arm one `generate` call takes (`scope`: "batch" or "arm"; an option
    named `scope` overrides it, as the fake backend's does), and its traits: the engine that computes
    its tokens, the step times it is priced by, the word for its batch size, whether its engine is a
    launched server. Every layer that treats backends differently asks these, never the backend's
    name."""

    target: str
    requires: tuple[str, ...]
    hint: str  # how to install `requires`
    options_type: type[BackendOptions]
    scope: Scope = "batch"
    refusals: tuple[Refusal, ...] = ()  # the start-up errors that mean "this setting is refused"
    engine: Engine = "none"  # what computes its tokens (the traits below follow from it)
    priced_as: str | None = None  # its row of throughput.toml's step times (None: never priced)
    batch_word: str = "batch"  # what the plan's batch_size is to its engine, as the report says it
    launched: bool = False  # its engine runs in a server process the capsule launches, not in its own

    @property
    def static_batches(self) -> bool:
        """Whether an arm's batches are fixed in advance and run one after another (the transformers
        engine): independent given their composition, so an arm splits into batch shares, and priced
        per batch step."""
        return self.engine == "transformers"

    @property
    def on_vllm(self) -> bool:
        """Whether its tokens come from a vLLM engine (offline, or a launched server): it reserves a KV
        cache (fixed by `kv_cache_memory_bytes`, else a share of the GPU) and runs on the vLLM
        stand-in in a rehearsal."""
        return self.engine == "vllm"

    @property
    def options(self) -> dict[str, Option]:
        """Every option of the backend, by name (read from `options_type`)."""
        return self.options_type.table()

    def required(self) -> tuple[str, ...]:
        """The options a plan must set."""
        return tuple(name for name, option in self.options.items() if option.required)


def cuda_index(device: object) -> int | None:
    """The CUDA device an arm's `device` option names ("cuda" is 0, "cuda:K" is K), or None (unset,
    or not a CUDA device): the one reading of it for the backend's absent-device refusal, the cost
    estimate and doctor's lane memory."""
    if not isinstance(device, str) or not device.startswith("cuda"):
        return None
    _cuda, _colon, index = device.partition(":")
    return int(index) if index.isdigit() else 0

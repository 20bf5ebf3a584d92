"""A plan's `backend_options` checked against its backend's declaration (`capsule.prereg.backend_specs`),
and the typed options a backend runs with: each option's type, choices, bounds and whether a plan
must set it are read from the declaration, so no option is checked anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping

from capsule.errors import BadInputError
from capsule.prereg.backend_specs import SPECS, FakeOptions
from capsule.prereg.backend_types import BackendOptions, Scope


def check_options(backend: str, options: Mapping[str, object], where: str, plan: bool) -> dict[str, object]:
    """`options` checked against `backend`'s declaration; returns them with integers given for floats
    as floats. Raises BadInputError prefixed with `where` for an unknown option (listing the allowed
    ones), a wrong type or choice, and, when the options come from a plan, a missing required option."""
    spec = SPECS[backend]
    declared = spec.options
    allowed = ", ".join(sorted(declared)) or "none"
    for key in options:
        if key not in declared:
            raise BadInputError(f"{where}: unknown key {key!r} for backend {backend!r} (allowed: {allowed})")
    if plan:
        for key in spec.required():
            if key not in options:
                raise BadInputError(
                    f"{where}: missing required key {key!r} (it can change results, so a plan must set it: "
                    f"{declared[key].why})"
                )
    checked: dict[str, object] = {}
    for key, value in options.items():
        option = declared[key]
        if option.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, option.type) or (option.type is int and isinstance(value, bool)):
            raise BadInputError(f"{where}: {key!r} must be a {option.type.__name__}, got {value!r}")
        if option.choices and value not in option.choices:
            expected = ", ".join(option.choices)
            raise BadInputError(f"{where}: {key!r} is {value!r}; expected one of: {expected}")
        if option.bounds is not None and isinstance(value, int | float):
            low, high = option.bounds
            if not low <= value <= high:
                raise BadInputError(f"{where}: {key!r} is {value!r}; it must lie in [{low}, {high}]")
        checked[key] = value
    return checked


def resolved_options(backend: str, options: Mapping[str, object], where: str) -> BackendOptions:
    """The options a backend runs with: its options dataclass built from the checked `options`, its
    declared defaults for the rest."""
    return SPECS[backend].options_type.build(check_options(backend, options, where, plan=False))


def call_scope(backend: str, options: Mapping[str, object]) -> Scope:
    """How much of an arm one `generate` call of `backend` takes under `options`: "batch" (one formed
    batch) or "arm" (every remaining request). The backends and the timing statistics both read it."""
    resolved = resolved_options(backend, options, f"backend {backend!r}")
    return resolved.scope if isinstance(resolved, FakeOptions) else SPECS[backend].scope

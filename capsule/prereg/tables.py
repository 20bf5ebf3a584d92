"""One TOML table of a plan file, read with strict key and type checks and located error messages.

`capsule.prereg.loader` reads every table through a `Section`, so that each message names the plan
file and the table (`arm 'bs4'.decoding: unknown key 'temprature' (allowed: ...)`).
"""

from __future__ import annotations

import tomllib
from typing import Any, TypeVar

from capsule.errors import BadInputError
from capsule.prereg.limits import TOML_INTEGER, Limit
from capsule.run_dir import name_problem

Choice = TypeVar("Choice", bound=str)


def one_of(value: str, choices: tuple[Choice, ...]) -> Choice | None:
    """`value` as the member of `choices` it equals, typed as the choices are (a `Literal`'s values,
    say), or None where it is none of them."""
    return next((choice for choice in choices if choice == value), None)


class Section:
    """One TOML table of the plan file, with `where` (e.g. "arm 'bs4'") for error messages."""

    def __init__(self, file: str, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise BadInputError(f"{file}: {where}: expected a table, got {type(data).__name__}")
        self.file, self.where, self.data = file, where, data

    def fail(self, message: str) -> BadInputError:
        """A BadInputError naming the file and this table."""
        return BadInputError(f"{self.file}: {self.where}: {message}")

    def keys(self, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
        """Refuse unknown keys (listing the allowed ones) and missing required keys."""
        allowed = sorted(set(required) | set(optional))
        for key in self.data:
            if key not in allowed:
                raise self.fail(f"unknown key {key!r} (allowed: {', '.join(allowed)})")
        for key in required:
            if key not in self.data:
                raise self.fail(f"missing required key {key!r} (it can change results, so it has no default)")

    def _get(self, key: str, default: Any) -> Any:
        if default is not None:
            return self.data.get(key, default)
        if key not in self.data:
            raise self.fail(f"missing required key {key!r}")
        return self.data[key]

    def text(self, key: str, choices: tuple[str, ...] = (), default: str | None = None) -> str:
        """A string value, optionally one of `choices`."""
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be a string, got {value!r}")
        if choices and value not in choices:
            raise self.fail(f"{key!r} is {value!r}; expected one of: {', '.join(choices)}")
        return value

    def choice(self, key: str, choices: tuple[Choice, ...], default: Choice | None = None) -> Choice:
        """A string value that is one of `choices`, typed as they are (`text` checks and words the
        error)."""
        chosen = one_of(self.text(key, choices, default), choices)
        if chosen is None:  # text() refused every other value; an empty `choices` refuses none
            raise self.fail(f"{key!r} has no choices to be one of")
        return chosen

    def integer(
        self, key: str, minimum: int, default: int | None = None, limit: Limit = TOML_INTEGER
    ) -> int:
        """An integer (not a bool) of at least `minimum` and at most `limit.high` (the reason quoted)."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer, got {value!r}")
        if value < minimum:
            raise self.fail(f"{key!r} is {value}; it must be at least {minimum}")
        if value > limit.high:
            shown = value if value.bit_length() <= 256 else f"a {value.bit_length()}-bit integer"
            raise self.fail(f"{key!r} is {shown}; it must be at most {limit.high} ({limit.why})")
        return value

    def file_name(self, key: str = "name") -> str:
        """A name that becomes a file or directory name, held to the one rule (`capsule.run_dir.NAME_RE`)."""
        value = self.text(key)
        problem = name_problem(value)
        if problem is not None:
            raise self.fail(f"{key} {problem}")
        return value

    def number(self, key: str, low: float, high: float, default: float | None = None) -> float:
        """A number in [low, high] (TOML integers are accepted)."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{key!r} must be a number, got {value!r}")
        if not low <= value <= high:
            raise self.fail(f"{key!r} is {value}; it must lie in [{low}, {high}]")
        return float(value)

    def names(self, key: str, default: list[str] | None = None) -> tuple[str, ...]:
        """A list of strings."""
        value = self._get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{key!r} must be a list of strings, got {value!r}")
        return tuple(value)

    def sub(self, key: str, where: str) -> Section:
        """A nested table."""
        return Section(
            self.file, f"{self.where}.{where}" if self.where != "top level" else where, self._get(key, None)
        )


def parse_toml(text: str, file: str) -> dict[str, Any]:
    """A plan's TOML as a dict; every way `tomllib` can refuse text is one BadInputError naming `file`."""
    try:
        return tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, and int() refusing an integer of > 4300 digits
        raise BadInputError(f"{file}: not valid TOML: {error}") from error
    except RecursionError:  # tomllib recurses per nesting level: a plan is a few levels deep
        raise BadInputError(f"{file}: arrays or tables nested too deeply to be a plan") from None

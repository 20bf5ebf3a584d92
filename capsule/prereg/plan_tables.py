"""One table of a plan's bytes, read alone: the trusted signers (the trust check) and each arm's
declared backend (the dry-run check), from the plan copy a run used, whose other tables were
validated when it was sealed. The whole plan is parsed by `capsule.prereg.loader`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from capsule.errors import BadInputError
from capsule.prereg.loader import parse_evidence
from capsule.prereg.tables import Section, parse_toml


def plan_signers(data: bytes, path: Path) -> tuple[str, ...]:
    """The [evidence] signers of plan bytes, reading only that table (the trust check reads the plan a
    run used, whose other tables were validated when it was sealed)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInputError(f"{path}: not a UTF-8 TOML plan ({error})") from error
    return parse_evidence(Section(str(path), "top level", parse_toml(text, str(path))))


def plan_arm_backends(data: bytes, path: Path) -> dict[str, str]:
    """Each arm's declared backend, by arm name, reading only the [[arms]] tables' `name` and `backend`
    (what `capsule import` compares a run's sidecars with, to tell a dry run from a real one)."""
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInputError(f"{path}: not a UTF-8 TOML plan ({error})") from error
    arms = parsed.get("arms")
    tables = arms if isinstance(arms, list) else []
    return {
        str(table.get("name")): str(table.get("backend"))
        for table in tables if isinstance(table, dict)
    }

"""The runs committed to this repository, named once in `results/committed.toml`.

A checkout holds other runs too: the user's own `make reproduce`, an interrupted one, imports,
rehearsals. Whatever reads "the committed runs" (the test suite, `capsule reproduce`'s closing
comparison) reads them by role from this file, never by listing `results/`, so a checkout's own runs
change nothing it checks. The file:

    [runs.<role>]            path = "<plan>/<run_id>" (relative to results/), about = "one line"
    [reference]              "<plan path, as a bundle names it>" = "<role>": the run a new run of
                             that plan is compared with at the end of `capsule reproduce`
    [comparisons]            <name> = "<plan>/comparisons/<file>.md": committed comparison files

A checkout without the file (a GPU host's study directory) has no committed runs.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from capsule.errors import BadInputError
from capsule.run_dir import NAME_RE, RESULTS_ROOT

COMMITTED_FILE = "committed.toml"
TOP_KEYS = ("runs", "reference", "comparisons")
RUN_KEYS = ("path", "about")


@dataclass(frozen=True)
class CommittedRun:
    """One committed run: its role (the name tests and the reference table use) and directory."""

    role: str
    path: Path  # relative to the working directory: results/<plan>/<run_id>
    about: str


@dataclass(frozen=True)
class CommittedRuns:
    """Every committed run, the reference run of each plan, and the committed comparison files."""

    source: Path
    runs: tuple[CommittedRun, ...]
    references: dict[str, str]  # plan path -> role
    comparisons: tuple[Path, ...]

    def run(self, role: str) -> CommittedRun:
        """The committed run of `role` (BadInputError naming the file when there is none)."""
        for run in self.runs:
            if run.role == role:
                return run
        roles = ", ".join(run.role for run in self.runs) or "none"
        raise BadInputError(f"{self.source}: no committed run {role!r} (roles: {roles})")

    def reference_for(self, plan_path: str) -> CommittedRun | None:
        """The run a new run of `plan_path` is compared with, or None when the plan has none."""
        role = self.references.get(plan_path)
        return None if role is None else self.run(role)


def _relative(source: Path, where: str, value: object) -> PurePosixPath:
    """A path inside results/: a string, relative, without `..`."""
    if not isinstance(value, str) or not value:
        raise BadInputError(f"{source}: {where}: expected a path string, got {value!r}")
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        raise BadInputError(f"{source}: {where}: {value!r} must stay inside results/ (relative, no ..)")
    return path


def _table(source: Path, where: str, value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise BadInputError(f"{source}: [{where}] must be a table")
    return value


def _runs(source: Path, root: Path, table: dict[str, object]) -> tuple[CommittedRun, ...]:
    runs = []
    for role, entry in table.items():
        if not NAME_RE.fullmatch(role):
            raise BadInputError(f"{source}: [runs.{role}]: a role is lowercase letters, digits, _.-")
        fields = _table(source, f"runs.{role}", entry)
        unknown = sorted(set(fields) - set(RUN_KEYS))
        if unknown or "path" not in fields:
            raise BadInputError(
                f"{source}: [runs.{role}]: keys are {', '.join(RUN_KEYS)} (path required); found "
                f"{', '.join(sorted(fields)) or 'none'}"
            )
        path = _relative(source, f"[runs.{role}] path", fields["path"])
        about = fields.get("about", "")
        runs.append(CommittedRun(role, root / RESULTS_ROOT / path, about if isinstance(about, str) else ""))
    return tuple(runs)


def read_committed_runs(root: Path = Path(".")) -> CommittedRuns:
    """Parse `root/results/committed.toml` (BadInputError naming the file and table on bad input);
    no file: no committed runs."""
    source = root / RESULTS_ROOT / COMMITTED_FILE
    if not source.is_file():
        return CommittedRuns(source, (), {}, ())
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BadInputError(f"{source}: not valid TOML ({error})") from None
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise BadInputError(
            f"{source}: unknown table(s) {', '.join(unknown)} (allowed: {', '.join(TOP_KEYS)})"
        )
    runs = _runs(source, root, _table(source, "runs", data.get("runs", {})))
    roles = {run.role for run in runs}
    references: dict[str, str] = {}
    for plan, role in _table(source, "reference", data.get("reference", {})).items():
        if role not in roles:
            raise BadInputError(f"{source}: [reference] {plan!r} names {role!r}, which no [runs.*] table is")
        references[plan] = str(role)
    comparisons = tuple(
        root / RESULTS_ROOT / _relative(source, f"[comparisons] {name}", value)
        for name, value in _table(source, "comparisons", data.get("comparisons", {})).items()
    )
    return CommittedRuns(source, runs, references, comparisons)

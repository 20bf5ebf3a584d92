"""A run that any ledger entry records (a local `bundle` or an `import`) is finished: `reproduce` of
its plan starts a new run instead of resuming, re-signing or re-checking it (issue 26, finding 1).

The committed run `results/smollm2-135m/20261201T150926Z-7c0e5f54` entered the ledger through an
`import` entry; before the fix every `reproduce` of the default plan "resumed" it, which stopped with
the numerics guard on any other CPU kind and would have re-signed a committed run on the same kind.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_plan import REPO
from reference_runs import V3_IMPORTED_RUN

from capsule.cli import cli
from capsule.errors import CapsuleError
from capsule.hashing import sha256_file
from capsule.prereg.default_plan import default_plan
from capsule.prereg.ledger import Ledger

DEFAULT_PLAN = default_plan().as_posix()
IMPORTED_RUN = V3_IMPORTED_RUN.name
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")


def _tree_digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def _unfinished(names: list[str], ledger: Ledger) -> set[str]:
    """The run directories among `names` that no ledger entry records: a newcomer's interrupted
    `make reproduce` in this checkout, which `reproduce` rightly resumes (a committed run it never
    does, which is what the test below is about)."""
    return {name for name in names if RUN_ID.fullmatch(name) and not ledger.records_run(name)}


def test_the_ledger_answers_which_entries_record_a_run() -> None:
    ledger = Ledger.load(REPO / "prereg" / "ledger.jsonl", REPO)
    (imported,) = ledger.run_entries(IMPORTED_RUN)
    assert imported.kind == "import" and ledger.records_run(IMPORTED_RUN)
    assert not ledger.records_run("20990101T000000Z-00000000")


def test_reproduce_of_the_default_plan_never_reopens_a_committed_run(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger.load(REPO / "prereg" / "ledger.jsonl", REPO)
    shutil.copytree(REPO / "results" / "smollm2-135m", repo_copy / "results" / "smollm2-135m",
                    ignore=lambda _, names: _unfinished(names, ledger))
    committed = _tree_digests(repo_copy / "results")

    def stop_before_generating(*args: object, **kwargs: object) -> None:
        raise CapsuleError("stopped by the test before the first arm")

    monkeypatch.setattr("capsule.pipeline.stage_generate.generate_all", stop_before_generating)
    result = CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", DEFAULT_PLAN])
    assert "stopped by the test before the first arm" in result.stderr, result.stderr
    assert "resuming run" not in result.stderr and "signed again" not in result.stderr
    new_runs = [line for line in result.stderr.splitlines() if line.startswith("new run ")]
    assert len(new_runs) == 1, result.stderr
    after = _tree_digests(repo_copy / "results")
    assert {k: v for k, v in after.items() if k in committed} == committed  # no committed file changed
    started = {Path(k).parts[1] for k in after if k not in committed}
    assert len(started) == 1 and IMPORTED_RUN not in started

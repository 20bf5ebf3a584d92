"""A checkout that holds runs of its own passes the tests that read committed runs.

A newcomer runs `make reproduce`, then `make test`, in one checkout: results/ then holds their run
(signed by an ephemeral key the plan does not trust, with its bundle entry in the ledger) beside the
committed ones, and perhaps an interrupted run (of the default plan, its `start` entry last in the
ledger), a run of another plan, a rehearsal. This test makes
such a checkout (a copy of this one) and runs, inside it, every test that reads committed runs
(they name them in results/committed.toml, never "the first run found").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capsule.evidence.signing import generate_signer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from run_pair import as_if_run_for_real, dry_run, sign  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LEDGER = Path("prereg") / "ledger.jsonl"
IGNORED = shutil.ignore_patterns(".venv*", ".git", "runs", "__pycache__", ".pytest_cache", ".mypy_cache",
                                 ".ruff_cache", "*.egg-info", "models", "study")
#: The tests that read committed runs or the real ledger (the first run found once broke a newcomer's
#: `make test`, a ledger holding the newcomer's own `start` entries another), and the
#: node ids among them cheap enough to run twice (the re-derivations run once, in the suite itself).
AFFECTED = (
    "tests/unit/test_analysis_schema.py",
    "tests/corpus/test_bad_input_corpus.py::test_the_bases_are_valid",
    "tests/integration/test_reference_run.py",
    "tests/unit/test_recorded_runs.py",
    "tests/unit/test_prereg_tamper.py::test_real_ledger_verifies_and_seals_every_plan",  # own start entries
    "tests/unit/test_prereg_tamper.py::test_deleted_moved_duplicated_lines_are_named",  # one trailing
)
#: `make reproduce` stopped before its first arm, as a newcomer's Ctrl-C leaves it: a run directory of
#: the default plan with run.json and its manifest, and the run's `start` entry last in the ledger.
INTERRUPTED_REPRODUCE = """
import capsule.pipeline.stage_generate as stage
from capsule.cli import cli
from capsule.errors import CapsuleError
from capsule.prereg.default_plan import default_plan

def stop(*args: object, **kwargs: object) -> None:
    raise CapsuleError("interrupted before the first arm")

stage.generate_all = stop
cli(["reproduce", "--no-progress", "--plan", default_plan().as_posix()])
"""

pytestmark = [pytest.mark.slow]  # fake backends only: no model runs


def _own_runs(checkout: Path) -> list[Path]:
    """Put a newcomer's runs into `checkout`: a recorded run signed by a key the plan does not trust,
    an interrupted run, a directory of another plan, and a dry run left under runs/."""
    recorded = dry_run(checkout)
    target = checkout / "results" / "smoke" / recorded.name
    target.parent.mkdir(parents=True)
    recorded.rename(target)
    sign(as_if_run_for_real(target), checkout / LEDGER, key=generate_signer())  # an ephemeral key
    unfinished = dry_run(checkout)
    partial = checkout / "results" / "smoke-interrupted" / unfinished.name  # its id may be the first's
    partial.parent.mkdir(parents=True)
    unfinished.rename(partial)
    for name in ("bundle.dsse.json", "bundle.json", "analysis.json"):
        (partial / name).unlink()
    other = checkout / "results" / "another-plan" / "20260101T000000Z-00000000"
    other.mkdir(parents=True)
    (other / "run.json").write_text("{}\n")
    dry_run(checkout)  # stays in runs/dry-run, as a rehearsal stays in runs/rehearsal
    return [target, partial, other, _interrupt_reproduce(checkout)]


def _interrupt_reproduce(checkout: Path) -> Path:
    """Run `INTERRUPTED_REPRODUCE` in `checkout` and return the run directory it opened."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "XDG_CONFIG_HOME": str(checkout / "config")}
    result = subprocess.run([sys.executable, "-c", INTERRUPTED_REPRODUCE], cwd=checkout, env=env,
                            capture_output=True, text=True, timeout=300)
    assert "interrupted before the first arm" in result.stderr, result.stderr[-2000:]
    (opened,) = [line.split(" in ", 1)[1] for line in result.stderr.splitlines()
                 if line.startswith("new run ")]
    return checkout / opened


def _commit(checkout: Path) -> None:
    """Make `checkout` a git repository whose one commit holds everything copied."""
    git = ["git", "-c", "user.name=capsule-test", "-c", "user.email=test@capsule.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the checkout as cloned"]):
        subprocess.run([*git, *args], cwd=checkout, check=True, capture_output=True)


def test_tests_that_read_committed_runs_pass_in_a_checkout_with_runs_of_its_own(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=IGNORED, symlinks=True)
    _commit(checkout)  # the committed state, as a clone has it (the ledger's anchor is its last commit)
    extra = _own_runs(checkout)
    assert all(path.exists() for path in extra)
    before = sorted(p.relative_to(checkout).as_posix() for p in (checkout / "results").glob("smoke*/*"))
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not rederives",
         *AFFECTED],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]
    after = sorted(p.relative_to(checkout).as_posix() for p in (checkout / "results").glob("smoke*/*"))
    assert after == before  # nothing removed

"""`capsule reproduce`'s closing comparison: a new run against its plan's committed reference run,
written beside the runs, the new run's own key pinned; a failure is one line and never fails the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_pair import PLAN, as_if_run_for_real, dry_run, edit_row, new_root, sign

from capsule.cli import cli
from capsule.evidence.signing import generate_signer
from capsule.pipeline.reference_comparison import compare_with_reference, comparison_path
from capsule.prereg.ledger import Ledger

LEDGER = Path("prereg") / "ledger.jsonl"
PLAN_FILE = f"{PLAN}/plan.toml"


def _recorded_run(root: Path, *, trusted: bool) -> Path:
    """A run of the smoke plan under root/results/smoke/, signed and recorded in root's ledger (by the
    collaborator's key, or by a fresh one the plan does not trust, as a newcomer's ephemeral key)."""
    made = dry_run(root)
    # A run id is its start second and plan: two dry runs of one second share one, so each gets a parent.
    run = root / "results" / f"smoke-{len(list((root / 'results').glob('smoke-*')))}" / made.name
    run.parent.mkdir(parents=True)
    made.rename(run)
    sign(as_if_run_for_real(run), root / LEDGER, key=None if trusted else generate_signer())
    return run


def _name_reference(root: Path, reference: Path) -> None:
    committed = root / "results" / "committed.toml"
    relative = reference.relative_to(root / "results").as_posix()
    committed.write_text(
        f'[runs.smoke-ref]\npath = "{relative}"\nabout = "the test reference"\n\n'
        f'[reference]\n"{PLAN_FILE}" = "smoke-ref"\n'
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A root whose committed.toml names a recorded smoke run as the smoke plan's reference."""
    root = new_root(tmp_path_factory.mktemp("repo"))
    reference = _recorded_run(root, trusted=True)
    _name_reference(root, reference)
    return root, reference


def _check(root: Path, *args: str):  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        return CliRunner().invoke(cli, ["check-numbers", *args])


def test_a_newcomers_run_is_compared_with_the_reference(repo: tuple[Path, Path]) -> None:
    root, reference = repo
    run = _recorded_run(root, trusted=False)
    result = compare_with_reference(run, PLAN_FILE, root / LEDGER, pinned=True)
    assert result is not None and result.file == comparison_path(run, reference)
    assert result.file == run.parent / "comparisons" / f"{run.name}-vs-{reference.name}.md"
    assert result.lines[0].startswith("identical: every response of all ")
    assert result.lines[1].startswith("verdicts: all the same")
    assert "--key" in (result.check_command or "")
    assert not (run / "comparisons").exists()  # never inside the signed run
    key = str((run / "bundle.pub.pem").relative_to(root))
    assert _check(root, str(result.file.relative_to(root)), "--key", key).exit_code == 0
    assert _check(root, str(result.file.relative_to(root))).exit_code == 3  # the newcomer's key: pinned only


def test_a_run_that_differs_names_its_arms(repo: tuple[Path, Path]) -> None:
    root, reference = repo
    run = _recorded_run(root, trusted=False)
    edit_row(run, "hf-bf16-b4")  # re-signed without a ledger entry: then recorded again
    sign(run, root / LEDGER, key=generate_signer())
    result = compare_with_reference(run, PLAN_FILE, root / LEDGER, pinned=True)
    assert result is not None and result.file is not None
    assert result.lines[0].startswith("differs: 1 of ") and "hf-bf16-b4 (1 of " in result.lines[0]


def test_no_reference_for_the_plan_says_nothing(repo: tuple[Path, Path]) -> None:
    root, reference = repo
    assert compare_with_reference(reference, "prereg/other/plan.toml", root / LEDGER, pinned=False) is None
    assert compare_with_reference(reference, PLAN_FILE, root / LEDGER, pinned=False) is None  # itself


def test_a_failed_comparison_is_one_line_and_writes_nothing(repo: tuple[Path, Path], tmp_path: Path) -> None:
    root, reference = repo
    run = _recorded_run(root, trusted=False)
    (run / "analysis.json").write_text(json.dumps({"tampered": True}))  # no longer verifies
    before = Ledger.load(root / LEDGER).entries
    result = compare_with_reference(run, PLAN_FILE, root / LEDGER, pinned=True)
    assert result is not None and result.file is None and len(result.lines) == 1
    assert result.lines[0].startswith("the comparison with the reference run failed: ")
    assert not comparison_path(run, reference).exists()
    assert Ledger.load(root / LEDGER).entries == before


def test_a_broken_committed_file_is_one_line(repo: tuple[Path, Path], tmp_path: Path) -> None:
    root = new_root(tmp_path / "root")
    (root / "results" / "committed.toml").write_text("[runs\n")
    run = _recorded_run(root, trusted=False)
    result = compare_with_reference(run, PLAN_FILE, root / LEDGER, pinned=True)
    assert result is not None and result.file is None and len(result.lines) == 1
    assert "not valid TOML" in result.lines[0]


def test_reproduce_prints_the_comparison_after_the_verify_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from capsule.analysis.schema import Headline
    from capsule.commands import reproduce as command
    from capsule.pipeline.reference_comparison import ReferenceComparison
    from capsule.pipeline.reproduce import ReproduceResult

    reference = ReferenceComparison(Path("results/p/REF"), ("identical: x", "verdicts: y", "machines: z"),
                                    Path("results/p/comparisons/NEW-vs-REF.md"), "capsule check-numbers F")
    done = ReproduceResult(Path("results/p/NEW"), "NEW", Headline("REPRODUCED", [], False), [], "f" * 64,
                           "capsule verify results/p/NEW", reference)
    monkeypatch.setattr(command, "run_plan", lambda options, say: done)
    monkeypatch.setattr(command, "gpu_cost_lines", lambda plan, ledger: [])
    result = CliRunner().invoke(cli, ["reproduce", "--no-progress"])
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("verify: capsule verify results/p/NEW")
    assert lines[at + 1].startswith("reference: results/p/REF")
    assert lines[at + 2 : at + 5] == ["  identical: x", "  verdicts: y", "  machines: z"]
    assert lines[at + 5].startswith("comparison: results/p/comparisons/NEW-vs-REF.md (check it with")

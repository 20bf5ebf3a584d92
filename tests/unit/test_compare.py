"""`capsule compare`: identical runs, runs that differ, and every refusal (exit 2 or 3, one line)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_pair import (
    PLAN,
    REPO,
    as_if_run_for_real,
    copy_run,
    dry_run,
    edit_row,
    new_root,
    record_start,
    set_manifest,
    sign,
)

from capsule.cli import cli
from capsule.hashing import sha256_file
from capsule.prereg.loader import load_plan

N_ARMS = len(load_plan(REPO / PLAN).arms)  # the smoke plan's arms, each compared

ARM = "hf-bf16-b4"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A repository root whose ledger records one run of the smoke plan (a local run), and a
    second run made in another root (a run not recorded in this ledger), signed there by the
    collaborator's key this ledger trusts, whose start this ledger recorded (a `start` entry: a key a
    `signers` entry added signs only runs whose start the ledger decides; test_forgery)."""
    root = new_root(tmp_path_factory.mktemp("repo"))
    run = as_if_run_for_real(dry_run(root))  # a dry run is never compared (test_forgery_checkers)
    sign(run, root / "prereg" / "ledger.jsonl")
    elsewhere = as_if_run_for_real(dry_run(new_root(tmp_path_factory.mktemp("elsewhere"))))
    record_start(elsewhere, root / "prereg" / "ledger.jsonl")  # its start is this ledger's, not its word
    sign(elsewhere, None)
    return root, run, elsewhere


@pytest.fixture
def pair(made: tuple[Path, Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """(ledger, run A: the recorded run, run B: a copy of the other machine's run), fresh per test."""
    root, run, other = made
    ledger = tmp_path / "prereg" / "ledger.jsonl"
    ledger.parent.mkdir()
    shutil.copy(root / "prereg" / "ledger.jsonl", ledger)
    return ledger, run, copy_run(other, tmp_path / "other")


def _compare(ledger: Path, a: Path, b: Path, *extra: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["compare", str(a), str(b), "--ledger", str(ledger), *extra])


def test_identical_runs_report_every_arm_identical(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    result = _compare(ledger, a, b, "--json")
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads(result.stdout)
    arms = report["arms"]
    assert len(arms) == N_ARMS and all(arm["identity"]["identical_response"] == 8 for arm in arms)
    assert all(arm["pass_fail_changed"] == 0 for arm in arms)
    assert all(m["b"] == m["c"] == 0 and m["p_value"] == 1.0 for arm in arms for m in arm["metrics"].values())
    assert report["claim"]["agree"] and all(c["agree"] for c in report["comparisons"].values())
    assert report["runs"]["A"]["in_ledger"] and not report["runs"]["B"]["in_ledger"]
    markdown = _compare(ledger, a, b)
    assert markdown.exit_code == 0 and f"{N_ARMS} of {N_ARMS} arms byte-identical" in markdown.stdout
    assert "None: the manifests agree" in markdown.stdout


def test_runs_that_differ_show_identity_divergence_flips_and_causes(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["host"]["cpu"]["flags"] = ["avx2", "fma"]  # as if B ran on an AVX2-only CPU
    set_manifest(b, manifest)
    edit_row(b, ARM)  # B re-signed; not in this ledger: signature and digests only
    result = _compare(ledger, a, b, "--json")
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads(result.stdout)
    by_arm = {arm["arm"]: arm for arm in report["arms"]}
    changed = by_arm[ARM]
    assert changed["identity"]["identical_response"] == 7 and changed["identity"]["n_common"] == 8
    assert changed["identity"]["first_divergence"]["n"] == 1
    assert changed["identity"]["first_divergence"]["min"] == 4  # the edit starts at character 4
    assert changed["pass_fail_changed"] == 1
    strict = changed["metrics"]["prompt_level_strict_acc"]
    assert strict["b"] + strict["c"] == 1 and strict["p_value"] == 1.0 and strict["n_pairs"] == 8
    assert abs(strict["difference"]["value_pct"]) == 12.5  # one prompt of 8
    assert all(arm["identity"]["identical_response"] == 8 for name, arm in by_arm.items() if name != ARM)
    assert not report["runs"]["B"]["in_ledger"]
    assert "signature and digests only" in report["runs"]["B"]["verified"]
    assert [c["path"] for c in report["candidate_causes"]] == ["host.cpu.flags"]
    markdown = _compare(ledger, a, b).stdout
    assert f"| `{ARM}` | 7/8 |" in markdown and "`host.cpu.flags`" in markdown
    assert f"{N_ARMS - 1} of {N_ARMS} arms" in markdown


def _error_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_a_tampered_run_fails_verification_with_exit_3(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    rows = b / "generations" / f"{ARM}.jsonl"
    rows.write_bytes(rows.read_bytes().replace(b'"raw": "', b'"raw": "X', 1))
    result = _compare(ledger, a, b)
    assert result.exit_code == 3 and "in the bundle" in _error_line(result)


def test_a_recorded_run_whose_envelope_differs_from_the_ledger_fails_with_exit_3(
    pair: tuple[Path, Path, Path],
) -> None:
    ledger, a, _ = pair
    b = copy_run(a, ledger.parent.parent / "copy")
    sign(b, None)  # validly signed by another key, but this ledger records the first envelope
    result = _compare(ledger, a, b)
    assert result.exit_code == 3 and "ledger" in _error_line(result)


def test_an_incomplete_run_is_refused_with_exit_2(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    (b / "bundle.dsse.json").unlink()
    result = _compare(ledger, a, b)
    assert result.exit_code == 2 and "incomplete" in _error_line(result)


def test_a_run_with_a_partial_arm_is_refused_with_exit_2(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    meta_path = b / "generations" / f"{ARM}.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["status"] = "partial"
    meta_path.write_text(json.dumps(meta))
    result = _compare(ledger, a, b)
    assert result.exit_code == 2 and "partial" in _error_line(result)


def test_runs_of_different_plans_are_refused_with_exit_2(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    plan = b / "plan.toml"
    plan.write_text(plan.read_text() + "# another plan\n")
    bundle = json.loads((b / "bundle.json").read_text())
    bundle["plan"]["sha256"] = sha256_file(plan)
    (b / "bundle.json").write_text(json.dumps(bundle))
    sign(b, None)  # a consistent, validly signed run of other plan bytes
    result = _compare(ledger, a, b)
    assert result.exit_code == 2 and "different plans" in _error_line(result)


def _check(ledger: Path, *files: Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["check-numbers", *map(str, files), "--ledger", str(ledger)])


def test_a_committed_comparison_is_checked_by_check_numbers(pair: tuple[Path, Path, Path]) -> None:
    ledger, a, b = pair
    edit_row(b, ARM)
    out = ledger.parent.parent / "COMPARISON.md"
    written = _compare(ledger, a, b, "--out", str(out))
    assert written.exit_code == 0, written.output + written.stderr
    text = out.read_text()
    assert text.startswith("<!-- capsule:numbers run=") and " against=" in text
    assert f"| `{ARM}` | 7/8 |" in text
    assert "entries) verifies" not in text  # no ledger length quoted: the file stays true as the ledger grows
    checked = _check(ledger, out)
    assert checked.exit_code == 0, checked.output + checked.stderr
    assert checked.stdout.startswith("ok: ") and "1 region(s)" in checked.stdout
    # a number edited by hand is drift (exit 3), named with its line
    out.write_text(text.replace(f"| `{ARM}` | 7/8 |", f"| `{ARM}` | 8/8 |"))
    drifted = _check(ledger, out)
    assert drifted.exit_code == 3 and "found 8, expected 7" in drifted.stdout
    # --out never overwrites; --update rewrites the region from the runs
    again = _compare(ledger, a, b, "--out", str(out))
    assert again.exit_code == 2 and "--update" in _error_line(again)
    updated = _compare(ledger, a, b, "--update", str(out))
    assert updated.exit_code == 0 and "1 comparison region(s) rewritten" in updated.stdout
    assert out.read_text() == text and _check(ledger, out).exit_code == 0


def test_a_readme_summary_of_two_runs_is_checked_and_fails_when_a_run_is_tampered(
    pair: tuple[Path, Path, Path],
) -> None:
    ledger, a, b = pair
    edit_row(b, ARM)
    readme = ledger.parent.parent / "README.md"
    names = (a.as_posix(), b.as_posix())  # absolute paths stay valid relative to any file
    readme.write_text(
        f"Intro.\n<!-- capsule:numbers run={names[0]} against={names[1]} block=comparison_summary -->\n"
        "<!-- /capsule:numbers -->\n"
    )
    assert _compare(ledger, a, b, "--update", str(readme)).exit_code == 0
    summary = readme.read_text()
    assert f"{N_ARMS - 1} of {N_ARMS} arms byte-identical" in summary
    assert f"`{ARM}` (1 responses, 1 pass/fail)" in summary
    assert _check(ledger, readme).exit_code == 0
    rows = b / "generations" / f"{ARM}.jsonl"
    rows.write_bytes(rows.read_bytes().replace(b'"raw": "', b'"raw": "X', 1))
    tampered = _check(ledger, readme)
    assert tampered.exit_code == 3 and "in the bundle" in _error_line(tampered)


def test_a_comparison_region_with_an_unknown_block_is_a_one_line_error(
    pair: tuple[Path, Path, Path],
) -> None:
    ledger, a, b = pair
    readme = ledger.parent.parent / "README.md"
    readme.write_text(
        f"<!-- capsule:numbers run={a} against={b} block=headline -->\n<!-- /capsule:numbers -->\n"
    )
    result = _check(ledger, readme)
    assert result.exit_code == 2 and "comparison block" in _error_line(result)


def test_a_copy_of_a_run_under_another_name_is_not_a_second_run(pair: tuple[Path, Path, Path]) -> None:
    """Issue 38, item 4: a byte copy of a finished run, verified under another directory name, used to
    compare as a second run agreeing with the first."""
    ledger, a, _b = pair
    copy = copy_run(a, ledger.parent.parent / "copy-of-a")
    result = _compare(ledger, a, copy)
    assert result.exit_code == 2 and result.stderr.count("Error:") == 1, result.stderr
    assert "are the same run (run id " in result.stderr and "is not a second run" in result.stderr

"""RESULTS.md from analysis.json and manifest.json: headline, arms, comparisons, controls, machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_report_support import MANIFEST, make_run, toy_analysis

from capsule.cli import cli
from capsule.errors import BadInputError
from capsule.report.document import (
    BLOCKS,
    ReportInput,
    check_report,
    fmt_interval,
    fmt_pct,
    headline_line,
    load_run,
    render_block,
    render_report,
    write_report,
)


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return toy_analysis(tmp_path_factory.mktemp("analysis"))[0]


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return toy_analysis(tmp_path_factory.mktemp("failing"), failing=True)[0]


def test_headline_states_claim_value_interval_verdict_flips_and_echo(analysis: dict) -> None:
    text = render_block("headline", ReportInput(analysis, MANIFEST))
    reading = analysis["headline"]["readings"][0]
    assert f"read by the plan as `{analysis['claim']['metric']}`" in text
    assert f"**Verdict: {reading['verdict']}.**" in text
    assert (
        f"is {fmt_pct(reading['value_pct'])}, 95% bootstrap interval {fmt_interval(reading['interval'])}"
        in text
    )
    assert f"Changing {reading['flips_to_reverse']} prompts between pass and fail would reverse it" in text
    echo = analysis["controls"]["sanity"]["echo"]["metrics_pct"]["card_avg_strict"]
    assert f"echoing each prompt back as the answer scores {fmt_pct(echo)}" in text
    assert "quantized weights" in text
    assert "FAILED" not in text


def test_failed_controls_come_first(failing: dict) -> None:
    report = render_report(failing, MANIFEST)
    first = report.index("FAILED CONTROLS: sanity")
    assert first < report.index("**Claim:**") < report.index("## Arms")
    assert "compliant answers: expected 100.0%" in report[first : report.index("**Claim:**")]
    assert "(must be 100): FAILED" in render_block("controls", ReportInput(failing))


def test_arms_table_has_counts_intervals_truncation_and_tokens(analysis: dict) -> None:
    text = render_block("arms", ReportInput(analysis))
    arm = analysis["arms"]["b8"]
    strict = arm["metrics"]["prompt_level_strict_acc"]
    counts = strict["counts"]["prompt_level_strict_acc"]
    interval = fmt_interval(strict["intervals"]["wilson"])
    cell = f"{fmt_pct(strict['value_pct'])} ({counts['passed']}/{counts['total']}) {interval}"
    row = next(
        line
        for line in text.splitlines()
        if line.startswith("| b8 |") and "(" in line and "/" in line and "[" in line
    )
    assert cell in row
    settings_row = next(line for line in text.splitlines() if line.startswith("| b8 | fake"))
    assert f"| {arm['truncation']['truncated']} (20.00%) |" in settings_row
    assert "| **main** |" in text  # the verdict arm stands out


def test_comparisons_and_controls_read_as_sentences_and_tables(analysis: dict) -> None:
    comparisons = render_block("comparisons", ReportInput(analysis))
    comp = analysis["comparisons"]["batch"]
    assert (
        f"| batch | main vs b8 | `prompt_level_strict_acc` | 40 | {comp['b']} | {comp['c']} |" in comparisons
    )
    assert comp["verdict"].upper() in comparisons and "Rule: UNDERPOWERED if n_pairs < 10" in comparisons
    controls = render_block("controls", ReportInput(analysis))
    assert "{" not in controls and '"' not in controls  # no JSON dumps
    assert "Every rerun repeated its outputs byte for byte." in controls
    assert "| main vs b8 | batch 4 vs batch 8 (fake, float32) | 34/40 |" in controls
    assert "| main vs hf | fake vs hf (batch 4, float32) | 39/40 | character 25 (25–25) |" in controls
    assert "scored 3 times unseeded" in controls and "| avg strict |" in controls
    assert "- Empty responses (40): 0.00 on every metric (must be 0): passed." in controls
    assert "Letter band: every possible letter evaluated for the 13 prompts" in controls
    # controls appear generation first, scorer last
    assert controls.index("**rerun**") < controls.index("**batch**") < controls.index("**stability**")


def test_machine_block_from_manifest(analysis: dict) -> None:
    text = render_block("machine", ReportInput(analysis, MANIFEST))
    assert "- CPU: Toy CPU, 4 logical cores (4 usable); memory 8.0 GiB" in text
    assert "- GPUs: none" in text and "torch 2.0.0" in text
    assert render_block("machine", ReportInput(analysis, None)) == "No manifest.json in this run."


def test_every_block_renders_and_unknown_block_is_bad_input(analysis: dict) -> None:
    for name in BLOCKS:
        assert render_block(name, ReportInput(analysis, MANIFEST)).strip()
    with pytest.raises(BadInputError, match="known blocks: summary"):
        render_block("nope", ReportInput(analysis))


def test_headline_line() -> None:
    reading = {
        "metric": "card_avg_strict",
        "arm": "a",
        "value_pct": 16.955,
        "claim_pct": 29.9,
        "verdict": "REPRODUCED",
        "interval": {"low_pct": 3.3, "high_pct": 38.0},
        "flips_to_reverse": 1,
    }
    assert headline_line(reading) == (
        "card_avg_strict on a: 16.95 [3.30, 38.00] vs claim 29.90: REPRODUCED "
        "(1 prompt flip would reverse it)"
    )


def test_write_then_check_report_and_signature_note(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    path = write_report(run, plots=False, fingerprint="f" * 64)
    text = path.read_text(encoding="utf-8")
    assert (
        text.count("<!-- capsule:numbers run=. block=") == 5
        and "Signed with Ed25519 key `" + "f" * 64 in text
    )
    assert check_report(run) != []  # a fingerprint the run's bundle.json does not name
    write_report(run, plots=False)
    assert check_report(run) == []
    path.write_text(text.replace("| 40/40 |", "| 39/40 |", 1), encoding="utf-8")
    diff = check_report(run)
    assert any(line.startswith("-") and "39/40" in line for line in diff)


def test_check_report_accepts_the_bundle_fingerprint(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    write_report(run, plots=False, fingerprint="ab12")
    assert check_report(run) != []
    (run / "bundle.json").write_text(json.dumps({"key": {"fingerprint": "ab12"}}), encoding="utf-8")
    assert check_report(run) == []


def test_load_run_without_analysis_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no analysis.json"):
        load_run(tmp_path)


def test_report_command_writes_checks_and_protects_signed_runs(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["report", str(run), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert (run / "RESULTS.md").is_file()
    assert runner.invoke(cli, ["report", str(run), "--check"]).exit_code == 0
    results = run / "RESULTS.md"
    results.write_text(results.read_text(encoding="utf-8").replace("78.07", "78.08"), encoding="utf-8")
    checked = runner.invoke(cli, ["report", str(run), "--check"])
    assert checked.exit_code == 3 and "78.08" in checked.output
    (run / "bundle.json").write_text("{}", encoding="utf-8")
    refused = runner.invoke(cli, ["report", str(run), "--no-plots"])
    assert refused.exit_code == 2 and "is signed" in refused.output
    assert "78.08" in results.read_text(encoding="utf-8")  # untouched

"""RESULTS.md from analysis.json and manifest.json: headline, arms, comparisons, controls, machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from test_report_support import MANIFEST, make_run, toy_analysis

from capsule.analysis.codec import analysis_from_json, decode
from capsule.analysis.schema import Analysis, Reading
from capsule.cli import cli
from capsule.errors import BadInputError
from capsule.machine.manifest_record import parse_manifest
from capsule.report.document import (
    BLOCKS,
    ReportInput,
    check_report,
    headline_line,
    load_run,
    render_block,
    render_report,
    write_report,
)

RECORD = parse_manifest(MANIFEST)  # the toy run's manifest, as the report reads it


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return analysis_from_json(toy_analysis(tmp_path_factory.mktemp("analysis"))[0])


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return analysis_from_json(toy_analysis(tmp_path_factory.mktemp("failing"), failing=True)[0])


# The toy study (tests/unit/test_report_support.py): arm main passes prompts 1-30 of 40, so prompt-level
# strict is 30/40 = 75.00% (Wilson 95%: [59.81, 85.81]); its 53 instructions are 40 word checks (30 pass)
# and 13 seeded coins (all pass): 43/53 = 81.13%; their mean, card_avg_strict, is 78.07.


def test_headline_states_claim_value_interval_verdict_flips_and_echo(analysis: Analysis) -> None:
    text = render_block("headline", ReportInput(analysis, RECORD))
    assert "read by the plan as `card_avg_strict` (the mean of prompt-level and instruction-level" in text
    assert (
        "**Verdict: REPRODUCED.** On arm `main` (40 prompts), `card_avg_strict` is 78.07, "
        "95% bootstrap interval [67.09, 88.95], which contains the claimed 70.00. "
        "Changing 2 prompts between pass and fail would reverse it."
    ) in text
    # every echo ("Write about a <word>.") names its own word, and seeded coins pass: 100%
    assert "echoing each prompt back as the answer scores 100.00 `card_avg_strict`" in text
    assert (
        "| `prompt_level_strict_acc` | main | 40 | 75.00 | [59.81, 85.81] wilson 95% | **REPRODUCED** |"
        in text
    )
    assert "**Model:** Toy-1M (toy==1; quantized weights), weights tree digest `cdcdcdcdcdcdcdcd…`." in text
    assert "FAILED" not in text


def test_failed_controls_come_first(failing: Analysis) -> None:
    report = render_report(failing, RECORD)
    first = report.index("FAILED CONTROLS: sanity")
    assert first < report.index("**Claim:**") < report.index("## Arms")
    assert "compliant answers: expected 100.0%" in report[first : report.index("**Claim:**")]
    assert "(must be 100): FAILED" in render_block("controls", ReportInput(failing))


def test_arms_table_has_counts_intervals_truncation_and_tokens(analysis: Analysis) -> None:
    lines = render_block("arms", ReportInput(analysis)).splitlines()
    # keys divisible by 5 stop at the cap: 8 of 40; 10 + key % 3 tokens: median 11, 440 tokens in
    # 10 batches of 2 s for batch size 4 (22 tokens/s), 5 batches for batch size 8 (44 tokens/s)
    assert (
        "| **main** | fake | float32 | 4 | greedy | 0 | 64 | 40/40 | 40/40 | 8 (20.00%) | 11 | 22 |" in lines
    )
    assert "| b8 | fake | float32 | 8 | greedy | 0 | 64 | 40/40 | 40/40 | 8 (20.00%) | 11 | 44 |" in lines
    scores = next(line for line in lines if line.startswith("| **main** | 75.00"))
    assert scores.startswith("| **main** | 75.00 (30/40) [59.81, 85.81] | 81.13 (43/53) [")
    assert scores.endswith("| 78.07 [67.09, 88.95] |")
    # b8 fails prompts 1-6 more: 24/40, Wilson [44.60, 73.65]
    assert any(line.startswith("| b8 | 60.00 (24/40) [44.60, 73.65] | 69.81 (37/53) [") for line in lines)
    assert (
        "Wilson for prompt-level metrics, cluster bootstrap (200 resamples, seed 7) for instruction-level "
        "metrics and averages"
    ) in lines[-1]


def test_comparisons_and_controls_read_as_sentences_and_tables(analysis: Analysis) -> None:
    comparisons = render_block("comparisons", ReportInput(analysis))
    # 6 prompts pass in main only: exact McNemar p = 2 * 0.5**6; difference 75 - 60 points
    assert (
        "| batch | main vs b8 | `prompt_level_strict_acc` | 40 | 6 | 0 | 0.03125 | "
        "15.00 [5.00, 25.00] | DIFFER |" in comparisons
    )
    assert "Rule: UNDERPOWERED if n_pairs < 10; else 'differ' if the exact McNemar p" in comparisons
    controls = render_block("controls", ReportInput(analysis))
    assert "{" not in controls and '"' not in controls  # no JSON dumps
    assert "Every rerun repeated its outputs byte for byte." in controls
    assert "| main vs rerun | 40/40 | — |" in controls
    # card_avg_strict: main 78.07 - b8 64.91; b8's changed answers differ from the first character
    assert (
        "| main vs b8 | batch 4 vs batch 8 (fake, float32) | 34/40 | character 0 (0–0) | 6 | 0 | 0.03125 | "
        "13.16 [4.42, 22.12] | DIFFER |"
    ) in controls
    # hf adds " and more" after the 25 characters of "All about the cloud today" (key 7)
    assert (
        "| main vs hf | fake vs hf (batch 4, float32) | 39/40 | character 25 (25–25) | 0 | 0 | 1 | "
        "0.00 [0.00, 0.00] | INDISTINGUISHABLE |"
    ) in controls
    assert "Arm `main` scored 3 times unseeded" in controls and "| avg strict | 78.07 |" in controls
    assert "- Empty responses (40): 0.00 on every metric (must be 0): passed." in controls
    assert "53 instruction passes, each scored against the prompt's own instructions; most often " in controls
    assert "`toy:word` 40, `toy:coin` 13." in controls
    assert "- Hand-written compliant answers (1): 100.00 on every metric (must be 100): passed." in controls
    assert (
        "Letter band: every possible letter evaluated for the 13 prompts that draw one "
        "(keys 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39)"
    ) in controls
    # controls appear generation first, scorer last
    assert controls.index("**rerun**") < controls.index("**batch**") < controls.index("**stability**")


def test_machine_block_from_manifest(analysis: Analysis) -> None:
    text = render_block("machine", ReportInput(analysis, RECORD))
    assert "- CPU: Toy CPU, 4 logical cores (4 usable); memory 8.0 GiB" in text
    assert "- GPUs: none" in text and "torch 2.0.0" in text
    assert render_block("machine", ReportInput(analysis, None)) == "No manifest.json in this run."


def test_every_block_renders_and_unknown_block_is_bad_input(analysis: Analysis) -> None:
    for name in BLOCKS:
        assert render_block(name, ReportInput(analysis, RECORD)).strip()
    with pytest.raises(BadInputError, match="known blocks: summary"):
        render_block("nope", ReportInput(analysis))


def test_headline_line() -> None:
    reading = {
        "metric": "card_avg_strict",
        "arm": "a",
        "value_pct": 16.955,
        "claim_pct": 29.9,
        "n": 8,
        "min_n": 5,
        "verdict": "REPRODUCED",
        "interval": {"kind": "bootstrap", "confidence": 0.95, "low_pct": 3.3, "high_pct": 38.0},
        "flips_to_reverse": 1,
    }
    expected = (
        "card_avg_strict on a: 16.95 [3.30, 38.00] vs claim 29.90: REPRODUCED "
        "(1 prompt flip would reverse it)"
    )
    assert headline_line(decode(Reading, reading)) == expected


def test_write_then_check_report_and_signature_note(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    path = write_report(run, plots=False, fingerprint="f" * 64)
    text = path.read_text(encoding="utf-8")
    assert (
        text.count("<!-- capsule:numbers run=. block=") == 5
        and "Signed with Ed25519 key `" + "f" * 64 in text
    )
    assert check_report(run) != []  # a fingerprint the check is not given
    write_report(run, plots=False)
    assert check_report(run) == []
    path.write_text(text.replace("| 40/40 |", "| 39/40 |", 1), encoding="utf-8")
    diff = check_report(run)
    assert any(line.startswith("-") and "39/40" in line for line in diff)


def test_check_report_accepts_the_signing_fingerprint(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    write_report(run, plots=False, fingerprint="ab12")
    assert check_report(run) != [] and check_report(run, fingerprint="cd34") != []
    assert check_report(run, fingerprint="ab12") == []


def test_load_run_without_analysis_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no analysis.json"):
        load_run(tmp_path)


def test_report_command_writes_checks_and_protects_signed_runs(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["report", str(run), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert (run / "RESULTS.md").is_file()
    assert check_report(run) == []
    results = run / "RESULTS.md"
    results.write_text(results.read_text(encoding="utf-8").replace("78.07", "78.08"), encoding="utf-8")
    assert any("78.08" in line for line in check_report(run))
    # An unsigned run's report agreeing with its analysis proves nothing: both can be edited.
    checked = runner.invoke(cli, ["report", str(run), "--check"])
    assert checked.exit_code == 3 and "not signed" in checked.stderr and "not evidence" in checked.stderr
    (run / "bundle.json").write_text("{}", encoding="utf-8")
    refused = runner.invoke(cli, ["report", str(run), "--no-plots"])
    assert refused.exit_code == 2 and "is signed" in refused.output
    assert "78.08" in results.read_text(encoding="utf-8")  # untouched

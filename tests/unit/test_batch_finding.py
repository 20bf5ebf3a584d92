"""The batch finding sentence: per dtype, responses and pass/fail verdicts batch size changed; its
numbers are checked by check-numbers like every block's."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from reference_runs import V2_RUN

from capsule.analysis.codec import analysis_from_json
from capsule.report.batch_finding import batch_effects, batch_finding_block, contrasts_dtypes
from capsule.report.document import render_report
from capsule.report.numbers import check_files
from capsule.report.report_input import ReportInput

REPO = Path(__file__).resolve().parents[2]
REFERENCE_RUN = V2_RUN  # fp32 contrasts only


def _reference() -> dict[str, Any]:
    return json.loads((REFERENCE_RUN / "analysis.json").read_text())


def _with_bf16_pair(raw: dict[str, Any], changed: int, flips: tuple[int, int]) -> dict[str, Any]:
    """The reference analysis plus a bf16 copy of its batch control with `changed` responses and
    (b, c) verdict flips (as a bf16 run on a bf16-sensitive CPU would give)."""
    raw = copy.deepcopy(raw)
    control = copy.deepcopy(raw["controls"]["batch"])
    pair = control["pairs"][0]
    for arm in pair["settings"].values():
        arm["dtype"] = "bfloat16"
    pair["identical_response"] = pair["identical"] = pair["n_common"] - changed
    pair["paired"]["b"], pair["paired"]["c"] = flips
    raw["controls"] = {"batch-bf16": control, **raw["controls"]}
    return raw


def _block(raw: dict[str, Any]) -> str:
    return "\n".join(batch_finding_block(ReportInput(analysis_from_json(raw), None, ())))


def test_fp32_only_says_none_and_leaves_results_md_as_it_was() -> None:
    analysis = analysis_from_json(_reference())
    assert _block(_reference()) == "In fp32, none: 0 of 64 responses and 0 pass/fail verdicts changed."
    assert not contrasts_dtypes(analysis)
    assert "block=batch_finding" not in render_report(analysis, None)


def test_bf16_and_fp32_side_by_side_in_one_sentence_in_results_md() -> None:
    raw = _with_bf16_pair(_reference(), changed=29, flips=(2, 1))
    effects = batch_effects(analysis_from_json(raw))
    assert [(e.dtype, e.responses_changed, e.verdicts_changed) for e in effects] == [
        ("bfloat16", 29, 3), ("float32", 0, 0)
    ]
    text = _block(raw)
    assert text == (
        "In bf16, batch size changed 29 of 64 responses and 3 pass/fail verdicts under vllm "
        "(max_num_seqs 16 vs 48); in fp32, none: 0 of 64 responses and 0 pass/fail verdicts changed."
    )
    assert "block=batch_finding" in render_report(analysis_from_json(raw), None)


def test_check_numbers_catches_a_drifted_batch_finding(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    raw = _with_bf16_pair(_reference(), changed=29, flips=(2, 1))
    (run / "analysis.json").write_text(json.dumps(raw))
    readme = tmp_path / "README.md"
    sentence = _block(raw)
    marker = "<!-- capsule:numbers run=run block=batch_finding -->"
    readme.write_text(f"{marker}\n{sentence}\n<!-- /capsule:numbers -->\n")
    result = check_files([readme])
    assert result.regions == 1 and result.facts == 8 and not result.drifts
    readme.write_text(readme.read_text().replace("29 of 64", "19 of 64"))
    (drift,) = check_files([readme]).drifts
    assert (drift.found, drift.expected) == ("19", "29")

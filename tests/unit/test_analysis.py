"""analyse (as JSON) end to end on toy arms: arms, comparisons, controls, headline, determinism."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_analysis_support import bad, gen_rows, good, make_arm, make_plan, make_scorer, toy_band, toy_prompts

from capsule.analysis.codec import analysis_json
from capsule.analysis.derive import analyse
from capsule.analysis.scorer_controls import stability_runs
from capsule.atomic import write_json_atomic
from capsule.prereg.metrics import interval_kind
from capsule.prereg.plan import Comparison, Control

PROMPTS = toy_prompts(40)
SCORE = make_scorer(PROMPTS)


def _responses(n_good: int, keys: list[int] | None = None) -> dict[int, str]:
    keys = keys or sorted(PROMPTS)
    return {k: (good(PROMPTS, k) if i < n_good else bad(k)) for i, k in enumerate(keys)}


def _study(tmp_path: Path, **plan_options: Any) -> tuple[Any, dict[str, list], dict[str, list]]:
    (tmp_path / "compliant.jsonl").write_text(json.dumps({"key": 1, "response": good(PROMPTS, 1)}) + "\n")
    arms = [make_arm("main"), make_arm("rerun"), make_arm("b8", batch_size=8), make_arm("sub", subset="ten")]
    controls = [
        Control(name="rerun", kind="rerun_identity", arms=("main", "rerun")),
        Control(name="batch", kind="batch_size", arms=("main", "b8")),
        Control(name="stability", kind="scorer_stability", arms=("main",), k=3),
        Control(name="sanity", kind="scorer_sanity", arms=(), compliant="compliant.jsonl"),
    ]
    comparisons = [
        Comparison(name="batch", arms=("main", "b8"), metric="prompt_level_strict_acc", confidence=0.95),
        Comparison(name="partial", arms=("main", "sub"), metric="inst_level_loose_acc", confidence=0.95),
    ]
    options = {
        "claim": 75.0,
        "other": ("inst_level_strict_acc", "card_avg_strict"),
        "min_pairs": 10,
        **plan_options,
    }
    plan = make_plan(arms, controls=controls, comparisons=comparisons, path=tmp_path / "plan.toml", **options)
    main = _responses(30)
    b8 = {**main, **{k: bad(k) for k in (1, 2, 3, 4, 5, 6)}}
    generations = {
        "main": gen_rows("main", PROMPTS, main),
        "rerun": gen_rows("rerun", PROMPTS, main),
        "b8": gen_rows("b8", PROMPTS, b8, batch=8),
        "sub": gen_rows("sub", PROMPTS, _responses(3, list(range(1, 7)))),
    }
    scores = {arm: SCORE(rows, 0) for arm, rows in generations.items()}
    return plan, generations, scores


def _build(plan, generations, scores, **kwargs: Any) -> dict[str, Any]:
    options = {"score_fn": SCORE, "band_fn": toy_band, "prompts": PROMPTS, **kwargs}
    return analysis_json(analyse(plan, generations, scores, **options))


def test_arm_sections(tmp_path: Path) -> None:
    analysis = _build(*_study(tmp_path))
    main = analysis["arms"]["main"]
    assert (main["n"], main["n_scored"], main["n_planned"], main["partial"]) == (40, 40, 40, False)
    strict = main["metrics"]["prompt_level_strict_acc"]
    assert strict["value_pct"] == 75.0 and strict["counts"] == {
        "prompt_level_strict_acc": {"passed": 30, "total": 40}
    }
    # Wilson 30/40 at 95% by hand: centre (p + z²/2n)/(1 + z²/n), half-width z·√(p(1-p)/n + z²/4n²)/(1 + z²/n)
    assert strict["intervals"]["wilson"] == {"low_pct": 59.81, "high_pct": 85.81}
    assert set(strict["intervals"]) == {"wilson", "clopper_pearson", "bootstrap"}
    assert set(main["metrics"]["card_avg_strict"]["intervals"]) == {"bootstrap"}
    assert main["metrics"]["card_avg_strict"]["counts"]["inst_level_strict_acc"]["total"] == 40 + 13
    assert main["truncation"] == {"truncated": 8, "truncated_pct": 20.0}
    assert main["closure"]["closed"] == 40
    # 10 + key % 3 output tokens for keys 1..40: 440 in all, at most 12; 10 batches of 2 s
    assert (main["tokens"]["total"], main["tokens"]["max"], main["tokens"]["wall_s"]) == (440, 12, 20.0)
    assert main["tokens"]["tokens_per_s"] == 22.0 and main["tokens"]["median"] == 11.0
    sub = analysis["arms"]["sub"]
    assert (sub["n"], sub["n_planned"], sub["partial"]) == (6, 10, True)


def test_comparisons_pair_on_common_keys(tmp_path: Path) -> None:
    analysis = _build(*_study(tmp_path))
    batch = analysis["comparisons"]["batch"]
    assert (batch["n_pairs"], batch["b"], batch["c"]) == (40, 6, 0)
    assert batch["p_value"] == 0.03125 and batch["verdict"] == "differ"  # exact McNemar: 2 · 0.5**6
    partial = analysis["comparisons"]["partial"]
    assert partial["n_pairs"] == 6 and partial["only_in"] == {"main": 34, "sub": 0}
    assert partial["verdict"] == "UNDERPOWERED"  # 6 pairs < min_pairs 10


def test_headline_readings_and_flips(tmp_path: Path) -> None:
    analysis = _build(*_study(tmp_path))
    readings = analysis["headline"]["readings"]
    assert [r["metric"] for r in readings] == [
        "prompt_level_strict_acc",
        "inst_level_strict_acc",
        "card_avg_strict",
    ]
    first = readings[0]
    assert first["verdict"] == analysis["headline"]["verdict"] == "REPRODUCED"
    assert first["interval"]["kind"] == "wilson"
    # 75% is inside Wilson(30/40); the nearest pass count whose interval excludes it is 24 (upper 73.65)
    assert first["flips_to_reverse"] == 6
    assert [r["interval"]["kind"] for r in readings[1:]] == ["bootstrap", "bootstrap"]
    for reading in readings[1:]:
        assert reading["flips_to_reverse"] is None or reading["flips_to_reverse"] >= 1
    # the bootstrap interval of a reading is the one reported for that metric on the arm
    arm_interval = analysis["arms"]["main"]["metrics"]["card_avg_strict"]["intervals"]["bootstrap"]
    assert {k: readings[2]["interval"][k] for k in ("low_pct", "high_pct")} == arm_interval


@pytest.mark.parametrize(
    "options,verdict",
    [
        ({"claim": 30.0}, "NOT REPRODUCED"),
        ({"min_n": 41}, "UNDERPOWERED"),
        ({"arm": "missing"}, "UNDERPOWERED"),
    ],
)
def test_headline_verdicts(tmp_path: Path, options: dict[str, Any], verdict: str) -> None:
    analysis = _build(*_study(tmp_path, **options))
    assert analysis["headline"]["verdict"] == verdict
    if verdict == "UNDERPOWERED":
        assert analysis["headline"]["readings"][0]["flips_to_reverse"] is None


def test_controls_sections(tmp_path: Path) -> None:
    analysis = _build(*_study(tmp_path))
    controls = analysis["controls"]
    assert controls["rerun"]["all_identical"] and controls["rerun"]["pairs"][0]["identical"] == 40
    assert controls["batch"]["pairs"][0]["identical"] == 34
    assert controls["batch"]["pairs"][0]["first_divergence"]["n"] == 6
    stability = controls["stability"]["metrics"]["prompt_level_strict_acc"]
    assert stability["seeded_pct"] == 75.0 and len(stability["values_pct"]) == 3
    # the unseeded coin only ever flips prompts carrying toy:coin (every third key)
    assert {entry["key"] % 3 for entry in controls["stability"]["unstable_prompts"]} <= {0}
    assert (
        controls["sanity"]["passed"] and controls["sanity"]["empty"]["metrics_pct"]["card_avg_strict"] == 0.0
    )
    assert analysis["failed_controls"] == [] and analysis["skipped_controls"] == []
    assert analysis["headline"]["failed_controls"] is False


def test_failed_and_skipped_controls(tmp_path: Path) -> None:
    plan, generations, scores = _study(tmp_path)
    del generations["rerun"]

    def lenient(rows, seed):
        return [
            {
                "key": r["key"],
                "instruction_id_list": list(PROMPTS[r["key"]].instruction_id_list),
                "strict": {
                    "prompt": True,
                    "instructions": [True] * len(PROMPTS[r["key"]].instruction_id_list),
                },
                "loose": {
                    "prompt": True,
                    "instructions": [True] * len(PROMPTS[r["key"]].instruction_id_list),
                },
            }
            for r in rows
        ]

    analysis = _build(plan, generations, scores, score_fn=lenient)
    assert analysis["failed_controls"] == ["sanity"] and analysis["headline"]["failed_controls"] is True
    assert analysis["controls"]["sanity"]["failures"]
    assert analysis["skipped_controls"] == ["rerun"]


def test_stored_stability_runs_are_used(tmp_path: Path) -> None:
    plan, generations, scores = _study(tmp_path)
    control = plan.controls[2]
    runs = stability_runs(control, generations, make_scorer(PROMPTS, random.Random(1)))

    def seeded_only(rows, seed):
        assert seed is not None, "unseeded scoring must come from the stored runs"
        return SCORE(rows, seed)

    analysis = _build(plan, generations, scores, score_fn=seeded_only, stability_scores={"stability": runs})
    passed = [100.0 * sum(row["strict"]["prompt"] for row in run) / len(run) for run in runs]
    stored = analysis["controls"]["stability"]["metrics"]["prompt_level_strict_acc"]["values_pct"]
    assert stored == [round(value, 2) for value in passed]


def test_analysis_is_deterministic_json(tmp_path: Path) -> None:
    plan, generations, scores = _study(tmp_path)
    runs = {
        "stability": stability_runs(plan.controls[2], generations, make_scorer(PROMPTS, random.Random(2)))
    }
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_json_atomic(first, _build(plan, generations, scores, stability_scores=runs))
    write_json_atomic(second, _build(plan, generations, scores, stability_scores=runs))
    assert first.read_bytes() == second.read_bytes()
    assert json.loads(first.read_text())["schema"] == "capsule.analysis/1"


def test_interval_kind() -> None:
    assert interval_kind("prompt_level_loose_acc", "clopper_pearson") == "clopper_pearson"
    assert interval_kind("inst_level_loose_acc", "wilson") == "bootstrap"


def test_throughput_per_backend_scope() -> None:
    from dataclasses import replace

    from capsule.analysis.throughput import timing_scope, token_stats, wall_seconds

    # batch scope: each row carries its batch's time -> sum over batches
    rows = [
        {"batch_index": b, "elapsed_s": t, "n_output_tokens": 10} for b, t in [(0, 2.0), (0, 2.0), (1, 3.0)]
    ]
    assert wall_seconds(rows, "batch") == 5.0
    assert token_stats(rows).tokens_per_s == 6.0
    # arm scope: time since the call started, batches in completion order; a resume restarts the clock
    arm_rows = [
        {"batch_index": b, "elapsed_s": t, "n_output_tokens": 10}
        for b, t in [(0, 1.0), (0, 4.0), (1, 6.0), (2, 7.5), (3, 0.5), (3, 2.5)]
    ]
    assert wall_seconds(arm_rows, "arm") == 7.5 + 2.5
    assert token_stats([]).tokens_per_s is None
    assert timing_scope(make_arm("v", backend="vllm")) == "arm"
    assert timing_scope(make_arm("h", backend="hf")) == "batch"
    assert timing_scope(replace(make_arm("f"), backend_options={"scope": "arm"})) == "arm"

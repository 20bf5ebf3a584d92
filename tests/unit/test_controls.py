"""Controls: output identity, first divergence, setting contrasts, seed vs batch, scorer controls."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_analysis_support import (
    bad,
    gen_rows,
    good,
    make_arm,
    make_plan,
    make_scorer,
    toy_band,
    toy_prompts,
)

from capsule.analysis.control_inputs import ControlInputs
from capsule.analysis.control_schema import (
    ContrastSection,
    RerunSection,
    SeedVsBatchSection,
    SkippedCheck,
    SkippedControl,
    Traced,
)
from capsule.analysis.controls import rerun_identity, seed_vs_batch, setting_contrast
from capsule.analysis.derive import run_control
from capsule.analysis.divergence import char_codes, first_divergence, identity_contrast
from capsule.analysis.outcomes import outcomes_from_scores
from capsule.analysis.scorer_controls import load_compliant, scorer_sanity, scorer_stability, stability_runs
from capsule.errors import BadInputError
from capsule.prereg.plan import Control

PROMPTS = toy_prompts(12)
SCORE = make_scorer(PROMPTS)


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([], [7]) == 0
    assert char_codes("ab") == [97, 98]


def word_ids(text: str, vocabulary: dict[str, int] | None = None) -> list[int]:
    """A deterministic word tokenizer: each new word gets the next id (no salted `hash()`)."""
    vocabulary = {} if vocabulary is None else vocabulary
    return [vocabulary.setdefault(word, len(vocabulary)) for word in text.split()]


def test_identity_contrast_counts_and_units() -> None:
    a = gen_rows("a", PROMPTS, {1: "hello world", 2: "same", 3: "abcdef", 4: "only a"})
    b = gen_rows("b", PROMPTS, {1: "hello there", 2: "same", 3: "abcxyz", 5: "only b"})
    result = identity_contrast(a, b)
    assert (result.n_common, result.only_in_a, result.only_in_b) == (3, 1, 1)
    assert result.identical == 1 and result.identical_response == 1
    assert result.first_divergence.indices == [3, 6] and result.first_divergence.unit == "characters"
    assert result.first_divergence.median == 4.5 and result.first_divergence.max == 6
    vocabulary: dict[str, int] = {}
    words = identity_contrast(a, b, tokenize=lambda text: word_ids(text, vocabulary))
    # "hello world" / "hello there" part at word 1; "abcdef" / "abcxyz" at word 0
    assert words.first_divergence.indices == [0, 1] and words.first_divergence.unit == "tokenize"
    for row, ids in zip(a[:3], ([5, 6, 7], [1], [9, 9]), strict=True):
        row["output_ids"] = ids
    for row, ids in zip(b[:3], ([5, 6, 8], [1], [9, 9]), strict=True):
        row["output_ids"] = ids
    with_ids = identity_contrast(a, b)
    # key 3: same ids but different text (a decode difference) counts at the end of the ids
    assert with_ids.first_divergence.indices == [2, 2] and with_ids.first_divergence.unit == "output_ids"


def _inputs(plan, responses_by_arm: dict[str, dict[int, str]]) -> ControlInputs:
    generations = {arm: gen_rows(arm, PROMPTS, responses) for arm, responses in responses_by_arm.items()}
    outcomes = {arm: outcomes_from_scores(SCORE(rows, 0)) for arm, rows in generations.items()}
    return ControlInputs(plan=plan, generations=generations, outcomes=outcomes, tokenize=None)


def test_rerun_identity_and_input_mismatch_failure() -> None:
    plan = make_plan([make_arm("r1"), make_arm("r2")])
    control = Control(name="rerun", kind="rerun_identity", arms=("r1", "r2"))
    same = {k: good(PROMPTS, k) for k in PROMPTS}
    section = rerun_identity(control, _inputs(plan, {"r1": same, "r2": same}))
    assert isinstance(section, RerunSection)
    assert section.all_identical and section.pairs[0].identical == 12 and section.failures == []
    inputs = _inputs(plan, {"r1": same, "r2": {**same, 4: "changed"}})
    inputs.generations["r2"][0]["input_ids_sha256"] = "other"  # type: ignore[index]
    section = rerun_identity(control, inputs)
    assert isinstance(section, RerunSection)
    assert not section.all_identical and section.pairs[0].identical == 11
    assert section.pairs[0].input_ids_mismatch == [1] and "input ids differ" in section.failures[0]


def test_batch_size_contrast_has_identity_and_paired_test() -> None:
    plan = make_plan([make_arm("b1", batch_size=1), make_arm("b8", batch_size=8)])
    control = Control(name="batch", kind="batch_size", arms=("b1", "b8"))
    a = {k: good(PROMPTS, k) for k in PROMPTS}
    b = {k: (bad(k) if k <= 6 else good(PROMPTS, k)) for k in PROMPTS}
    section = setting_contrast(control, _inputs(plan, {"b1": a, "b8": b}))
    assert isinstance(section, ContrastSection)
    pair = section.pairs[0]
    assert section.failures == [] and pair.identical == 6
    assert pair.settings["b1"].batch_size == 1 and pair.settings["b8"].batch_size == 8
    paired = pair.paired
    assert (paired.b, paired.c, paired.n_pairs) == (6, 0, 12)
    # exact McNemar on 6 vs 0: 2 * 0.5**6
    assert paired.p_value == 0.03125 and paired.verdict == "differ"
    assert paired.difference is not None and paired.difference.value_pct == 50.0


def test_seed_vs_batch_sorts_pairs_by_source() -> None:
    arms = [
        make_arm("s1b1", seed=1, batch_size=1, mode="sample"),
        make_arm("s2b1", seed=2, batch_size=1, mode="sample"),
        make_arm("s1b8", seed=1, batch_size=8, mode="sample"),
        make_arm("s2b8", seed=2, batch_size=8, mode="sample"),
    ]
    plan = make_plan(arms)
    control = Control(name="svb", kind="seed_vs_batch", arms=tuple(a.name for a in arms))
    base = {k: good(PROMPTS, k) for k in PROMPTS}
    flip = {k: (bad(k) if k <= 4 else good(PROMPTS, k)) for k in PROMPTS}
    # seed changes the outcome on 4 prompts; batch size changes nothing
    section = seed_vs_batch(control, _inputs(plan, {"s1b1": base, "s1b8": base, "s2b1": flip, "s2b8": flip}))
    assert isinstance(section, SeedVsBatchSection)
    assert [p.arms for p in section.seed_pairs] == [["s1b1", "s2b1"], ["s1b8", "s2b8"]]
    assert [p.arms for p in section.batch_pairs] == [["s1b1", "s1b8"], ["s2b1", "s2b8"]]
    assert [p.discordant for p in section.seed_pairs] == [4, 4]
    assert section.summary["seed"].mean_discordant_share == 0.3333  # 4 of 12 prompts
    assert section.summary["batch"].mean_discordant_share == 0.0
    assert section.larger == "seed"


def test_generation_control_with_a_missing_arm_is_skipped() -> None:
    plan = make_plan([make_arm("r1"), make_arm("r2")])
    control = Control(name="rerun", kind="rerun_identity", arms=("r1", "r2"))
    section = run_control(control, _inputs(plan, {"r1": {1: "x"}}))
    assert isinstance(section, SkippedControl)
    assert section.skipped == "no generations for arm(s) r2" and section.failures == []


def test_scorer_stability_reports_spread_and_responsible_instructions() -> None:
    control = Control(name="stab", kind="scorer_stability", arms=("a",), k=6)
    generations = {"a": gen_rows("a", PROMPTS, {k: good(PROMPTS, k) for k in PROMPTS})}
    outcomes = {"a": outcomes_from_scores(SCORE(generations["a"], 0))}
    runs = stability_runs(control, generations, make_scorer(PROMPTS, random.Random(3)))
    assert len(runs) == 6
    section = scorer_stability(control, generations, outcomes, runs, toy_band)
    assert section.failures == [] and section.k == 6
    unstable = section.unstable_prompts
    assert unstable and {u.key % 3 for u in unstable} == {0}
    assert all(u.instructions == ["toy:coin"] for u in unstable)
    strict = section.metrics["prompt_level_strict_acc"]
    assert strict.seeded_pct == 100.0 and strict.spread_pct is not None and strict.spread_pct > 0
    assert strict.min_pct == min(strict.values_pct) and strict.max_pct == max(strict.values_pct)
    assert strict.spread_pct == round(strict.max_pct - strict.min_pct, 2)
    assert section.band.data == {"ambiguous_keys": [3, 6, 9, 12], "width": 0.333333}


def test_scorer_sanity_passes_and_traces_echo_passes(tmp_path: Path) -> None:
    compliant = tmp_path / "compliant.jsonl"
    compliant.write_text(
        "".join(json.dumps({"key": k, "response": good(PROMPTS, k)}) + "\n" for k in (1, 2, 4))
    )
    control = Control(name="sanity", kind="scorer_sanity", arms=(), compliant="compliant.jsonl")
    section = scorer_sanity(control, tmp_path, {}, SCORE, 0, PROMPTS)
    assert section.failures == [] and section.passed
    assert section.empty.n == 12 and set(section.empty.metrics_pct.values()) == {0.0}
    # every echo ("Write about a <word>.") contains its own word: each pass traced to toy:word or the coin
    passes = section.echo.passes
    assert {p.instruction_id for p in passes} == {"toy:word", "toy:coin"}
    assert len([p for p in passes if p.instruction_id == "toy:word"]) == 12
    assert not isinstance(section.compliant, SkippedCheck)
    assert section.compliant.metrics_pct["prompt_level_strict_acc"] == 100.0
    assert section.compliant.failing == []


def test_scorer_sanity_fails_a_broken_scorer(tmp_path: Path) -> None:
    compliant = tmp_path / "c.jsonl"
    compliant.write_text(json.dumps({"key": 1, "response": bad(1)}) + "\n")
    control = Control(name="sanity", kind="scorer_sanity", arms=(), compliant="c.jsonl")

    def lenient(rows, seed):  # passes everything, even blank responses, and mislabels instructions
        return [
            {
                "key": r["key"],
                "instruction_id_list": ["toy:other"],
                "strict": {"prompt": True, "instructions": [True]},
                "loose": {"prompt": True, "instructions": [True]},
            }
            for r in rows
        ]

    section = scorer_sanity(control, tmp_path, {}, lenient, 0, PROMPTS)
    assert not section.passed
    assert any(f.startswith("empty responses: expected 0.0%") for f in section.failures)
    assert any("prompt echoes: scored instructions differ" in f for f in section.failures)
    section = scorer_sanity(control, tmp_path, {}, SCORE, 0, PROMPTS)
    assert any(f.startswith("compliant answers") for f in section.failures)
    assert not isinstance(section.compliant, SkippedCheck)
    assert section.compliant.failing == [
        Traced(key=1, instruction_id="toy:word", readings=["strict", "loose"])
    ]


def test_scorer_sanity_needs_prompts_and_a_readable_compliant_file(tmp_path: Path) -> None:
    control = Control(name="sanity", kind="scorer_sanity", arms=())
    with pytest.raises(BadInputError, match="needs the prompts"):
        scorer_sanity(control, tmp_path, {}, SCORE, 0, None)
    (tmp_path / "bad.jsonl").write_text('{"key": 1}\n')
    with pytest.raises(BadInputError, match=r"bad.jsonl:1"):
        load_compliant(tmp_path / "bad.jsonl")
    with pytest.raises(BadInputError, match="compliant answers file not found"):
        load_compliant(tmp_path / "missing.jsonl")


def test_scorer_sanity_with_the_real_scorer(prompts_path: Path, tmp_path: Path) -> None:
    """A few real prompts through ifeval_scorer: blank scores 0, echoes are traced to their own ids."""
    from ifeval_scorer import load_prompts, score

    prompts = dict(list(load_prompts(prompts_path).items())[:8])
    control = Control(name="sanity", kind="scorer_sanity", arms=())
    section = scorer_sanity(
        control, tmp_path, {}, lambda rows, seed: score(rows, seed=seed, prompts=prompts).rows, 0, prompts
    )
    assert section.failures == [] and set(section.empty.metrics_pct.values()) == {0.0}
    assert all(p.instruction_id in prompts[p.key].instruction_id_list for p in section.echo.passes)

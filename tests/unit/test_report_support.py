"""A small run directory for the report, plot and check-numbers tests: analysis.json built by
`capsule.analysis.derive.analyse` (as JSON) from the toy stand-ins, a manifest and generation rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_analysis_support import bad, gen_rows, good, make_arm, make_plan, make_scorer, toy_band, toy_prompts

from capsule.analysis.codec import analysis_json
from capsule.analysis.derive import analyse
from capsule.atomic import write_json_atomic
from capsule.prereg.plan import Comparison, Control

PROMPTS = toy_prompts(40)
SCORE = make_scorer(PROMPTS)

EXAMPLE_MANIFEST = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "cpu-2core.json"


def _overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`base` with `top`'s values put in, table by table (a real manifest with the toy's facts)."""
    merged = dict(base)
    for key, value in top.items():
        both = isinstance(value, dict) and isinstance(base.get(key), dict)
        merged[key] = _overlay(base[key], value) if both else value
    return merged


#: A valid manifest (the report refuses any other) carrying the toy machine's facts the tests check.
MANIFEST: dict[str, Any] = _overlay(json.loads(EXAMPLE_MANIFEST.read_text(encoding="utf-8")), {
    "capture": {"created_at": "2026-01-02T03:04:05Z"},
    "host": {
        "cpu": {"model": "Toy CPU", "logical_cores": 4, "usable_cores": 4},
        "memory": {"total_bytes": 8 * 2**30},
        "os": {"distribution": "Toy OS 1", "kernel": "6.0.0"},
    },
    "gpus": [],
    "gpu_system": {},
    "software": {"python": "3.11.7", "packages": {"torch": {"distribution": "torch", "version": "2.0.0"}}},
    "scorer": {"package": "ifeval_scorer", "version": "1.0.0", "source_digest": "ab" * 32},
    "model": {
        "name": "Toy-1M",
        "source": {"requirement": "toy==1", "note": "quantized weights"},
        "tree_digest": "cd" * 32,
    },
})
MANIFEST["model"]["source"] = {"requirement": "toy==1", "note": "quantized weights"}  # the toy's alone


def toy_analysis(
    tmp_path: Path, *, failing: bool = False, comparisons: bool = True
) -> tuple[dict[str, Any], dict]:
    """(analysis dict, generations by arm) for four toy arms; `failing` makes the scorer-sanity
    control fail (a "compliant" answer that follows nothing)."""
    answer = bad(1) if failing else good(PROMPTS, 1)
    (tmp_path / "compliant.jsonl").write_text(json.dumps({"key": 1, "response": answer}) + "\n")
    arms = [make_arm("main"), make_arm("rerun"), make_arm("b8", batch_size=8), make_arm("hf", backend="hf")]
    controls = [
        Control(name="rerun", kind="rerun_identity", arms=("main", "rerun")),
        Control(name="batch", kind="batch_size", arms=("main", "b8")),
        Control(name="backend", kind="backend", arms=("main", "hf")),
        Control(name="stability", kind="scorer_stability", arms=("main",), k=3),
        Control(name="sanity", kind="scorer_sanity", arms=(), compliant="compliant.jsonl"),
    ]
    plan_comparisons = (
        [Comparison(name="batch", arms=("main", "b8"), metric="prompt_level_strict_acc", confidence=0.95)]
        if comparisons
        else []
    )
    plan = make_plan(
        arms,
        controls=controls,
        comparisons=plan_comparisons,
        path=tmp_path / "plan.toml",
        claim=70.0,
        metric="card_avg_strict",
        other=("prompt_level_strict_acc",),
        interval="wilson",
        min_pairs=10,
        resamples=200,
    )
    main = {k: (good(PROMPTS, k) if k <= 30 else bad(k)) for k in PROMPTS}
    b8 = {**main, **{k: bad(k) + " changed" for k in (1, 2, 3, 4, 5, 6)}}
    hf = {**main, 7: good(PROMPTS, 7) + " and more"}
    generations = {
        "main": gen_rows("main", PROMPTS, main),
        "rerun": gen_rows("rerun", PROMPTS, main),
        "b8": gen_rows("b8", PROMPTS, b8, batch=8),
        "hf": gen_rows("hf", PROMPTS, hf),
    }
    scores = {arm: SCORE(rows, 0) for arm, rows in generations.items()}
    analysed = analyse(plan, generations, scores, score_fn=SCORE, band_fn=toy_band, prompts=PROMPTS)
    analysis = analysis_json(analysed)
    return json.loads(json.dumps(analysis)), generations


def make_run(tmp_path: Path, **options: Any) -> Path:
    """A run directory under `tmp_path` with analysis.json, manifest.json and generations/."""
    run = tmp_path / "run"
    analysis, generations = toy_analysis(tmp_path, **options)
    write_json_atomic(run / "analysis.json", analysis)
    write_json_atomic(run / "manifest.json", MANIFEST)
    for arm, rows in generations.items():
        lines = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        (run / "generations").mkdir(parents=True, exist_ok=True)
        (run / "generations" / f"{arm}.jsonl").write_text(lines, encoding="utf-8")
    return run

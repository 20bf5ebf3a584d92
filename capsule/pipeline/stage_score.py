"""The score and analyse stage: generations -> `scores/<arm>.jsonl` -> stability runs -> analysis.

Scores are made at the plan's scorer seed and stored with a sidecar naming the generations bytes
they were made from, so a resumed run rescores only what changed. The unseeded scorer runs of a
scorer_stability control are made once and stored, which makes `derive_analysis` a pure function of
the run's files: anyone can re-derive analysis.json from them, byte for byte.
`write_score_rows` is the one writer of score files, used here and by `capsule score`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from capsule.analysis.codec import write_analysis
from capsule.analysis.derive import analyse as analyse_rows
from capsule.analysis.schema import Analysis
from capsule.analysis.scorer_controls import stability_runs
from capsule.artifacts.cache import use_cache_for_scorer
from capsule.atomic import append_jsonl_durable, write_json_atomic, write_text_atomic
from capsule.generation.refused_arms import refused_arms
from capsule.hashing import sha256_file
from capsule.jsonio import dumps_line, read_json_object, read_jsonl_complete
from capsule.prereg.plan import Plan
from capsule.run_dir import RunDir
from ifeval_scorer import Prompt, letter_band, score

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class ScoreSidecar:
    """`scores/<arm>.meta.json`: the generations bytes an arm's scores were made from, the scorer
    seed and the row count. Read and written here alone (`read_score_sidecar`, `write_score_sidecar`)."""

    generations_sha256: str
    seed: int | None
    n: int


def write_score_sidecar(path: Path, sidecar: ScoreSidecar) -> None:
    """Write a score sidecar atomically."""
    write_json_atomic(path, asdict(sidecar))


def read_score_sidecar(path: Path) -> ScoreSidecar | None:
    """The sidecar at `path`; None where a field is missing or of another type (the arm is scored
    again). A file that is not a JSON object is bad input naming the file."""
    data = read_json_object(path, "scores sidecar")
    made_from, seed, n = data.get("generations_sha256"), data.get("seed"), data.get("n")
    if not (isinstance(made_from, str) and isinstance(n, int)) or not (seed is None or isinstance(seed, int)):
        return None
    return ScoreSidecar(made_from, seed, n)


def write_score_rows(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write score rows as canonical JSON lines, atomically: the same scores give the same bytes,
    whether a run's stage or `capsule score` wrote them."""
    write_text_atomic(path, "".join(dumps_line(row, compact=True) for row in rows))


def load_generations(run: RunDir, plan: Plan) -> dict[str, Rows]:
    """Each arm's generation rows as stored (empty list for an arm never started)."""
    return {arm.name: read_jsonl_complete(run.generations(arm.name)) for arm in plan.arms}


def score_arms(
    run: RunDir,
    plan: Plan,
    generations: Mapping[str, Rows],
    prompts: Mapping[int, Prompt],
    *,
    reuse: bool = True,
) -> dict[str, Rows]:
    """Score every arm at the plan's scorer seed into `scores/<arm>.jsonl`.

    A stored score file is reused only if its sidecar says it was made from the very generations
    bytes now on disk. With `reuse=False` every arm is scored afresh and nothing is written (the
    re-derivation check compares those scores with the stored ones).
    """
    scores: dict[str, Rows] = {}
    for arm in plan.arms:
        rows = generations.get(arm.name) or []
        out, sidecar = run.scores(arm.name), run.scores_meta(arm.name)
        if not rows:
            scores[arm.name] = []
            continue
        made_from = sha256_file(run.generations(arm.name))
        if reuse and out.exists() and sidecar.exists():
            stored = read_score_sidecar(sidecar)
            if stored is not None and (stored.generations_sha256, stored.seed) == (
                made_from, plan.scorer_seed
            ):
                scores[arm.name] = read_jsonl_complete(out)
                continue
        result = list(score(rows, seed=plan.scorer_seed, prompts=prompts).rows)
        scores[arm.name] = result
        if reuse:
            write_score_rows(out, result)
            write_score_sidecar(sidecar, ScoreSidecar(made_from, plan.scorer_seed, len(result)))
    return scores


def score_fn_for(prompts: Mapping[int, Prompt]) -> Callable[[Sequence[Mapping[str, Any]], int | None], Rows]:
    """The scorer as the controls call it: rows and a seed (None = upstream's unseeded draw)."""
    def run(rows: Sequence[Mapping[str, Any]], seed: int | None) -> Rows:
        return list(score(rows, seed=seed, prompts=prompts).rows)

    return run


def band_fn_for(
    prompts: Mapping[int, Prompt], seed: int
) -> Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]:
    """The scorer's exhaustive letter band, as the scorer-stability control calls it."""
    def run(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        return letter_band(rows, seed=seed, prompts=prompts).as_dict()

    return run


def stability_scores(
    run: RunDir, plan: Plan, generations: Mapping[str, Rows], prompts: Mapping[int, Prompt]
) -> dict[str, list[Rows]]:
    """The unseeded scorer runs of each scorer_stability control, made once and stored, so that
    analysis.json can later be re-derived from the files alone."""
    stored: dict[str, list[Rows]] = {}
    for control in plan.controls:
        if control.kind != "scorer_stability" or not generations.get(control.arms[0]):
            continue
        path = run.stability(control.name)
        runs_on_disk = read_jsonl_complete(path)
        if len(runs_on_disk) != control.k:
            runs = stability_runs(control, generations, score_fn_for(prompts))
            path.unlink(missing_ok=True)
            append_jsonl_durable(path, [{"run": i, "rows": rows} for i, rows in enumerate(runs)])
            runs_on_disk = read_jsonl_complete(path)
        stored[control.name] = [stored_run["rows"] for stored_run in runs_on_disk]
    return stored


def derive_analysis(
    run: RunDir,
    plan: Plan,
    prompts: Mapping[int, Prompt],
    tokenize: Callable[[str], list[int]] | None,
    *,
    rescore: bool = False,
) -> Analysis:
    """The analysis from the files of a run directory: scores (made if missing), stability runs,
    and the plan's rules. A pure function of those files, so anyone can re-derive it; `rescore`
    ignores the stored scores and scores the generations afresh (nothing is written). The scorer
    keeps its NLTK data in the capsule's cache (`use_cache_for_scorer`)."""
    use_cache_for_scorer()
    generations = load_generations(run, plan)
    scores = score_arms(run, plan, generations, prompts, reuse=not rescore)
    stability = stability_scores(run, plan, generations, prompts)
    return analyse_rows(
        plan,
        generations,
        scores,
        score_fn=score_fn_for(prompts),
        band_fn=band_fn_for(prompts, plan.scorer_seed),
        tokenize=tokenize,
        prompts=prompts,
        stability_scores=stability,
        refused=refused_arms(run, (arm.name for arm in plan.arms)),
    )


def analyse(
    run: RunDir, plan: Plan, prompts: Mapping[int, Prompt], tokenize: Callable[[str], list[int]] | None
) -> Analysis:
    """Score what is not scored yet, derive the analysis and write it to the run's analysis.json."""
    analysis = derive_analysis(run, plan, prompts, tokenize)
    write_analysis(run.analysis, analysis)
    return analysis


def model_tokenizer(model_dir: Path | None) -> Callable[[str], list[int]] | None:
    """The model tokenizer's encode (no special tokens), for first-divergence indices in tokens."""
    if model_dir is None:
        return None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return encode

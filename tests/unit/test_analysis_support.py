"""Small stand-ins shared by the stats / controls / analysis tests: a toy prompt table, a toy scorer,
generation rows and a plan built directly from `capsule.prereg.plan` dataclasses.

The toy scorer has two instructions: `toy:word` (the response contains `word`, case-insensitively
for the loose reading) and `toy:coin` (passes at random when unseeded, always when seeded: a stand-in
for the official scorer's unseeded letter draw). Blank responses pass nothing, as in IFEval.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arm_builder import build_arm

from capsule.prereg.plan import (
    Arm,
    Claim,
    Comparison,
    Control,
    Decoding,
    Model,
    Plan,
    PromptSet,
    Subset,
    VerdictRule,
)
from ifeval_scorer import Prompt

WORDS = ("apple", "river", "stone", "cloud")


def toy_prompts(n: int) -> dict[int, Prompt]:
    """n prompts; every prompt asks for one word, every third also carries `toy:coin`."""
    prompts = {}
    for key in range(1, n + 1):
        word = WORDS[key % len(WORDS)]
        ids = ("toy:word", "toy:coin") if key % 3 == 0 else ("toy:word",)
        kwargs = ({"word": word}, {}) if key % 3 == 0 else ({"word": word},)
        prompts[key] = Prompt(
            key=key, prompt=f"Write about a {word}.", instruction_id_list=ids, kwargs=kwargs
        )
    return prompts


def make_scorer(prompts: Mapping[int, Prompt], unseeded: random.Random | None = None):
    """A toy `score_fn(rows, seed)`; unseeded calls draw `toy:coin` from `unseeded`."""
    draw = unseeded or random.Random(12345)

    def check(instruction: str, kwargs: Mapping[str, Any], text: str, loose: bool, seed: int | None) -> bool:
        if not text.strip():
            return False
        if instruction == "toy:word":
            word = kwargs["word"]
            return word in (text.lower() if loose else text)
        return True if seed is not None else draw.random() < 0.5

    def score_fn(rows: Sequence[Mapping[str, Any]], seed: int | None) -> list[dict[str, Any]]:
        result = []
        for row in rows:
            prompt = prompts[int(row["key"])]
            out: dict[str, Any] = {"key": prompt.key, "instruction_id_list": list(prompt.instruction_id_list)}
            for reading in ("strict", "loose"):
                flags = [
                    check(i, k, row["response"], reading == "loose", seed)
                    for i, k in zip(prompt.instruction_id_list, prompt.kwargs, strict=True)
                ]
                out[reading] = {"prompt": all(flags), "instructions": flags}
            result.append(out)
        return result

    return score_fn


def toy_band(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A toy `band_fn`: the prompt keys carrying `toy:coin` and a float to exercise rounding."""
    return {"ambiguous_keys": tuple(int(r["key"]) for r in rows if int(r["key"]) % 3 == 0), "width": 1 / 3}


def gen_rows(
    arm: str,
    prompts: Mapping[int, Prompt],
    responses: Mapping[int, str],
    *,
    batch: int = 4,
    elapsed: float = 2.0,
    tokens: int = 10,
) -> list[dict[str, Any]]:
    """Generation rows for `responses` (key -> text), batched `batch` at a time in key order."""
    rows = []
    for index, key in enumerate(sorted(responses)):
        text = responses[key]
        rows.append(
            {
                "key": key,
                "arm": arm,
                "prompt_sha256": f"p{key}",
                "input_ids_sha256": f"i{key}",
                "n_prompt_tokens": 5,
                "raw": text,
                "response": text,
                "thinking_closed": True,
                "n_output_tokens": tokens + key % 3,
                "finish_reason": "length" if key % 5 == 0 else "stop",
                "batch_index": index // batch,
                "batch_keys_sha256": "x",
                "seed": 0,
                "elapsed_s": elapsed,
            }
        )
    return rows


def good(prompts: Mapping[int, Prompt], key: int) -> str:
    """A response that follows prompt `key`'s word instruction."""
    return f"All about the {prompts[key].kwargs[0]['word']} today"


def bad(key: int) -> str:
    """A response that follows nothing."""
    return f"Something else entirely, number {key}"


DECODING = Decoding(
    mode="greedy",
    temperature=0.0,
    top_p=1.0,
    top_k=0,
    min_p=0.0,
    presence_penalty=0.0,
    repetition_penalty=1.0,
)


def make_arm(
    name: str,
    *,
    batch_size: int = 4,
    seed: int = 0,
    backend: str = "fake",
    mode: str = "greedy",
    subset: str = "all",
) -> Arm:
    """An arm with everything fixed but the knobs controls vary."""
    decoding = DECODING if mode == "greedy" else Decoding("sample", 0.7, 0.9, 0, 0.0, 0.0, 1.0)
    return build_arm(
        name=name,
        backend=backend,
        subset=subset,
        batch_size=batch_size,
        seed=seed,
        max_new_tokens=64,
        decoding=decoding,
    )


def make_plan(
    arms: Sequence[Arm],
    *,
    controls: Sequence[Control] = (),
    comparisons: Sequence[Comparison] = (),
    claim: float = 50.0,
    metric: str = "prompt_level_strict_acc",
    other: Sequence[str] = (),
    interval: str = "wilson",
    min_n: int = 5,
    min_pairs: int = 5,
    arm: str | None = None,
    path: Path = Path("/nonexistent/plan.toml"),
    resamples: int = 2000,
) -> Plan:
    """A plan from dataclasses (the loader's validation is not under test here)."""
    return Plan(
        name="toy",
        description="",
        path=path,
        amends="",
        amend_reason="",
        model=Model(name="toy", source="embedded", files={"w": "0" * 64}),
        claim=Claim(text="toy claim", value=claim, metric=metric, other_readings=tuple(other), source="test"),
        prompts=PromptSet(
            sha256="0" * 64,
            subsets={"all": Subset(name="all", rule="all"), "ten": Subset(name="ten", rule="first", n=10)},
        ),
        scorer_seed=0,
        arms=tuple(arms),
        controls=tuple(controls),
        comparisons=tuple(comparisons),
        verdict=VerdictRule(
            arm=arm or arms[0].name,
            metric=metric,
            interval=interval,
            confidence=0.95,
            min_n=min_n,
            bootstrap_resamples=resamples,
            bootstrap_seed=7,
            min_pairs=min_pairs,
        ),
    )


def test_toy_scorer_follows_its_rules() -> None:
    prompts = toy_prompts(6)
    score = make_scorer(prompts)
    rows = score(
        [
            {"key": 1, "response": good(prompts, 1)},
            {"key": 3, "response": ""},
            {"key": 2, "response": bad(2)},
        ],
        0,
    )
    assert [r["strict"]["prompt"] for r in rows] == [True, False, False]
    assert rows[1]["strict"]["instructions"] == [False, False]

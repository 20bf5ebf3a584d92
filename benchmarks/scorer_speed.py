"""Time our scorer against Google's reference (lm-eval 0.4.13) on the 541 GPT-4 responses.

Both score strict + loose at seed 0 (the reference under the seeding protocol: `random.seed(0)` and
`langdetect.DetectorFactory.seed = 0` before each prompt's strict and loose pass). Each repetition
starts ours with empty memo caches, so no repetition profits from an earlier one. Prints the median
time of each, the ratio, and whether every verdict agreed.

    .venv/bin/python benchmarks/scorer_speed.py [--repeats 5] [--fixture PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from reference_ifeval import load_reference, reference_verdicts  # noqa: E402

from capsule.artifacts.gpt4_responses import fetch_gpt4_responses  # noqa: E402
from capsule.artifacts.pinned_prompts import fetch_prompts  # noqa: E402
from ifeval_scorer import clear_caches, evaluate_prompt, load_prompts  # noqa: E402


def main() -> None:
    """Run the timing and print one line per scorer plus the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fixture", type=Path, default=None,
                        help="GPT-4 responses (default: $CAPSULE_SHARED, ../shared, the cache, the URL)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the reference logs every undetectable language at ERROR

    prompts = load_prompts(fetch_prompts().path)
    by_text = {prompt.prompt: key for key, prompt in prompts.items()}
    fixture = args.fixture or fetch_gpt4_responses([REPO.parent / "shared"]).path
    rows = [json.loads(line) for line in fixture.read_text(encoding="utf-8").splitlines() if line]
    pairs = [(prompts[by_text[row["prompt"]]], row["response"]) for row in rows]
    load_reference()
    evaluate_prompt(*pairs[0], seed=0)  # load NLTK and langdetect profiles outside the timings

    ours_times: list[float] = []
    ref_times: list[float] = []
    ours: list[tuple[tuple[bool, ...], tuple[bool, ...]]] = []
    ref: list[tuple[tuple[bool, ...], tuple[bool, ...]]] = []
    for _ in range(args.repeats):
        clear_caches()
        start = time.perf_counter()
        ours = [(v.strict, v.loose) for v in (evaluate_prompt(p, r, seed=0) for p, r in pairs)]
        ours_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        ref = [reference_verdicts(p, r, seed=0) for p, r in pairs]
        ref_times.append(time.perf_counter() - start)

    ours_median, ref_median = statistics.median(ours_times), statistics.median(ref_times)
    same = sum(a == b for a, b in zip(ours, ref, strict=True))
    print(f"responses: {len(pairs)}, repeats: {args.repeats}")
    print(f"ours      median {ours_median:.3f} s  (all: {', '.join(f'{t:.3f}' for t in ours_times)})")
    print(f"reference median {ref_median:.3f} s  (all: {', '.join(f'{t:.3f}' for t in ref_times)})")
    print(f"ratio reference/ours: {ref_median / ours_median:.2f}x; identical verdicts: {same}/{len(pairs)}")


if __name__ == "__main__":
    main()

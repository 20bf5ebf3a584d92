"""`python -m ifeval_scorer GENERATIONS.jsonl --prompts input_data.jsonl [options]`: score a file.

Options: `-o/--out OUT`, `--seed N` or `--unseeded`, `--band`. Scores the generations file, writes the
scores JSONL and prints the four metrics. Errors print as one `Error: ...` line on stderr and exit 2.
(`capsule score` does the same with the capsule's pinned, sha256-verified prompts.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ifeval_scorer.band import band_of
from ifeval_scorer.errors import ScorerError
from ifeval_scorer.inputs import read_generations
from ifeval_scorer.prompts import load_prompts
from ifeval_scorer.scoring import score_file
from ifeval_scorer.summary import summary_lines


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ifeval_scorer", description="Score IFEval responses (rows with `key` and `response`)."
    )
    parser.add_argument("generations", type=Path, help="generations JSONL to score")
    parser.add_argument("--prompts", type=Path, required=True, help="the IFEval input_data.jsonl")
    parser.add_argument("-o", "--out", dest="out", type=Path, default=None,
                        help="scores JSONL to write (default: GENERATIONS with .scores.jsonl)")
    parser.add_argument("--output", dest="out", type=Path, help=argparse.SUPPRESS)  # the old name, kept
    parser.add_argument("--seed", type=int, default=0, help="seed for langdetect and the random letter")
    parser.add_argument("--unseeded", action="store_true", help="draw like upstream's unseeded scorer")
    parser.add_argument("--band", action="store_true", help="also print the band over all random letters")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, score, print the summary; return the exit status (0, or 2 on an error)."""
    args = _parser().parse_args(argv)
    try:
        prompts = load_prompts(args.prompts)
        scores, written = score_file(args.generations, args.out,
                                     seed=None if args.unseeded else args.seed, prompts=prompts)
        band = None
        if args.band:
            band = band_of(read_generations(args.generations, prompts), prompts, seed=args.seed)
    except ScorerError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(scores, written, band)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`capsule score GENERATIONS.jsonl`: score responses with our IFEval scorer; write scores, print metrics.

The capsule's part: the pinned prompt file (fetched and sha256-verified) and the cache the scorer's
NLTK data lives in. Scoring, the scores file and the printed summary are the scorer's.
"""

from __future__ import annotations

from pathlib import Path

import click

from capsule.artifacts.cache import use_cache_for_scorer
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.errors import BadInputError


@click.command()
@click.argument("generations", type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Scores JSONL to write (default: GENERATIONS with .scores.jsonl).")
@click.option("--output", "output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              hidden=True, deprecated="use --out, the name every command that writes a file uses")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed for langdetect and the random letter; scores are a pure function of it.")
@click.option("--unseeded", is_flag=True, help="Draw like upstream's unseeded scorer (ignores --seed).")
@click.option("--band", is_flag=True, help="Also print the ambiguity band over all random letters.")
@click.option("--prompts", "prompts_path", type=click.Path(path_type=Path), default=None,
              help="IFEval input_data.jsonl to use (verified by sha256); default: the pinned one.")
def score(generations: Path, out: Path | None, output: Path | None, seed: int, unseeded: bool,
          band: bool, prompts_path: Path | None) -> None:
    """Score GENERATIONS (JSONL rows with `key` and `response`) with the four IFEval metrics."""
    if out is not None and output is not None and out != output:
        raise BadInputError(f"--out {out} and --output {output} disagree; give --out only")
    target = out if out is not None else output
    from capsule.pipeline.stage_score import write_score_rows
    from ifeval_scorer import load_prompts
    from ifeval_scorer.band import band_of
    from ifeval_scorer.inputs import read_generations
    from ifeval_scorer.scoring import score_file
    from ifeval_scorer.summary import summary_lines

    use_cache_for_scorer()
    prompts = load_prompts(fetch_prompts(prompts_path).path)
    scores, written = score_file(generations, target, seed=None if unseeded else seed, prompts=prompts,
                                 write=write_score_rows)
    letters = band_of(read_generations(generations, prompts), prompts, seed=seed) if band else None
    for line in summary_lines(scores, written, letters):
        click.echo(line)

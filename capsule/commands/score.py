"""`capsule score GENERATIONS.jsonl`: score responses with our IFEval scorer; write scores, print metrics."""

from __future__ import annotations

from pathlib import Path

import click


def _points(value: float) -> str:
    return f"{100 * value:6.2f}"


@click.command()
@click.argument("generations", type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Scores JSONL to write (default: GENERATIONS with .scores.jsonl).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed for langdetect and the random letter; scores are a pure function of it.")
@click.option("--unseeded", is_flag=True, help="Draw like upstream's unseeded scorer (ignores --seed).")
@click.option("--band", is_flag=True, help="Also print the ambiguity band over all random letters.")
@click.option("--prompts", "prompts_path", type=click.Path(path_type=Path), default=None,
              help="IFEval input_data.jsonl to use (verified by sha256); default: the pinned one.")
def score(generations: Path, output: Path | None, seed: int, unseeded: bool, band: bool,
          prompts_path: Path | None) -> None:
    """Score GENERATIONS (JSONL rows with `key` and `response`) with the four IFEval metrics."""
    from capsule.pipeline.stage_score import write_score_rows
    from ifeval_scorer.scores import METRICS
    from ifeval_scorer.scoring import score_file

    scores, written = score_file(generations, output, seed=None if unseeded else seed,
                                 prompts_path=prompts_path, write=write_score_rows)
    tallies = scores.tallies
    click.echo(f"scored {len(scores.prompts)} responses (seed {scores.seed}) -> {written}")
    for name in METRICS:
        tally = tallies[name]
        click.echo(f"{name:<24} {_points(tally.accuracy)}  ({tally.passed}/{tally.total})")
    if band:
        from ifeval_scorer.band import band_of
        from ifeval_scorer.inputs import read_generations
        from ifeval_scorer.scoring import pinned_prompts

        table = pinned_prompts(prompts_path)
        result = band_of(read_generations(generations, table), table, seed=seed)
        keys = ", ".join(str(key) for key in result.ambiguous_keys) or "none"
        click.echo(f"ambiguity band over the 52 letters (random-letter prompts: {keys}):")
        for name in METRICS:
            click.echo(f"{name:<24} {_points(result.low[name])} .. {_points(result.high[name])}")

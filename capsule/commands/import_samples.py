"""`capsule import-samples HARNESS FILE [--against OTHER]`: check another harness's IFEval run."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.generation.harness import HARNESSES

HARNESS_CHOICE = click.Choice(list(HARNESSES))


@click.command("import-samples")
@click.argument("harness", type=HARNESS_CHOICE)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--against", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A second samples file: compare the two runs, paired on their common prompts.")
@click.option("--against-harness", type=HARNESS_CHOICE, default=None,
              help="The harness that wrote --against (default: HARNESS).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Directory to write (default: runs/imports/<name>); refused unless new or empty.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Our scorer's seed (langdetect and the random letter).")
@click.option("--metric", default="prompt_level_strict_acc", show_default=True,
              help="Metric of the paired comparison (with --against).")
@click.option("--prompts", "prompts_path", type=click.Path(path_type=Path), default=None,
              help="IFEval input_data.jsonl to use (verified by sha256); default: the pinned one.")
def import_samples(harness: str, file: Path, against: Path | None, against_harness: str | None,
                   out: Path | None, seed: int, metric: str, prompts_path: Path | None) -> None:
    """Import an lm-eval (--log_samples) or lighteval (details) IFEval run: score it with our scorer,
    list every instruction where the harness's stored verdict differs (with the reason), the letter
    band, and with --against the paired comparison of two runs."""
    from capsule.analysis.harness_paired import PairedSettings
    from capsule.pipeline.import_samples import ImportRequest
    from capsule.pipeline.import_samples import import_samples as run_import
    from capsule.report.harness_import import import_lines

    request = ImportRequest(
        harness=harness, path=file, against=against, against_harness=against_harness, out=out, seed=seed,
        prompts_path=prompts_path, paired=PairedSettings(metric=metric),
    )
    run, record = run_import(request)
    for line in import_lines(record):
        click.echo(line)
    click.echo(f"written: {run.path} (generations/, scores/, {run.import_record.name})")

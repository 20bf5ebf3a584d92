"""`capsule fetch [prompts|model|all] [--plan DIR]`: fetch and verify the pinned artifacts.

Without `--plan`, the model is the embedded one. With `--plan`, it is the plan's: the embedded model,
a hub model downloaded at the plan's pinned revision into its store directory (`--model-dir`, else
`$CAPSULE_MODELS/<repo name>`) with every file checked against the plan's sha256, or a local
directory (source "path"), which is verified where it is. On a host without network a hub model's
directory is copied there by hand and verified the same way.
"""

from __future__ import annotations

from pathlib import Path

import click

from capsule.artifacts.cache import cache_dir
from capsule.artifacts.embedded_model import fetch_model
from capsule.artifacts.model_store import fetch_plan_model
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.commands.options import plan_option
from capsule.errors import BadInputError
from capsule.prereg.loader import load_plan


@click.command()
@click.argument("what", type=click.Choice(["prompts", "model", "all"]), default="all")
@click.option(
    "--prompts", "prompts_path", type=click.Path(path_type=Path), default=None,
    help="Use this IFEval input_data.jsonl (verified by sha256) instead of fetching one.",
)
@plan_option("Fetch this plan's model (a hub model at its pinned revision) instead of the embedded one.")
@click.option(
    "--model-dir", type=click.Path(path_type=Path), default=None,
    help="With --plan: the model's directory (default $CAPSULE_MODELS/<repo name>).",
)
def fetch(what: str, prompts_path: Path | None, plan_path: Path | None, model_dir: Path | None) -> None:
    """Fetch and verify the IFEval prompts and the model (sha256-pinned)."""
    if model_dir is not None and plan_path is None:
        raise BadInputError("--model-dir goes with --plan (the embedded model lives in the cache)")
    click.echo(f"cache: {cache_dir()}")
    if what in ("prompts", "all"):
        fetched = fetch_prompts(prompts_path)
        click.echo(f"prompts: {fetched.path} (source: {fetched.source}, sha256 verified)")
    if what in ("model", "all"):
        if plan_path is not None:
            model = load_plan(plan_path).model
            click.echo(fetch_plan_model(model, model_dir, lambda line: click.echo(line, err=True)))
        else:
            directory, source = fetch_model()
            click.echo(f"model: {directory} (source: {source}, every file's sha256 verified)")

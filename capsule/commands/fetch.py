"""`capsule fetch [prompts|model|all]`: fetch and verify the pinned artifacts into the cache."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.artifacts.cache import cache_dir
from capsule.artifacts.embedded_model import fetch_model
from capsule.artifacts.pinned_prompts import fetch_prompts


@click.command()
@click.argument("what", type=click.Choice(["prompts", "model", "all"]), default="all")
@click.option(
    "--prompts", "prompts_path", type=click.Path(path_type=Path), default=None,
    help="Use this IFEval input_data.jsonl (verified by sha256) instead of fetching one.",
)
def fetch(what: str, prompts_path: Path | None) -> None:
    """Fetch and verify the IFEval prompts and the embedded model (sha256-pinned)."""
    click.echo(f"cache: {cache_dir()}")
    if what in ("prompts", "all"):
        fetched = fetch_prompts(prompts_path)
        click.echo(f"prompts: {fetched.path} (source: {fetched.source}, sha256 verified)")
    if what in ("model", "all"):
        directory, source = fetch_model()
        click.echo(f"model: {directory} (source: {source}, every file's sha256 verified)")

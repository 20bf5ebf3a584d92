"""`capsule compare RUN_A RUN_B [--json] [--ledger PATH] [--key PEM]... [--out FILE | --update FILE]`:
two runs of one sealed plan, arm by arm; printed, or written as a committed comparison that
check-numbers keeps true."""

from __future__ import annotations

import json
from pathlib import Path

import click

from capsule.commands.options import ledger_option, pinned_keys_option


@click.command()
@click.argument("run_a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON instead of Markdown.")
@ledger_option("This repository's ledger: a run it records is verified against it too (it must exist).")
@pinned_keys_option(
    "Pin a signer's public key PEM (repeatable): the run it signed is accepted even if its plan does not "
    "trust the key, as `verify --key` (a newcomer's run: --key THEIR_RUN/bundle.pub.pem).",
)
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Write the comparison to this new Markdown file between capsule:numbers markers, so "
    "`capsule check-numbers FILE` keeps it true (refuses an existing file; see --update).",
)
@click.option(
    "--update", "update", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="Rewrite this Markdown file's comparison regions of RUN_A against RUN_B (run=A against=B).",
)
def compare(run_a: Path, run_b: Path, as_json: bool, ledger_path: Path, keys: tuple[Path, ...],
            out: Path | None, update: Path | None) -> None:
    """Compare two complete runs of the same sealed plan (typically from two machines).

    Verifies both, then per arm: identical responses, first divergence, every metric's difference
    with exact McNemar and a paired bootstrap interval, the verdicts side by side, and the manifest
    differences that can change numerics. Exit 2 for different plans or an incomplete run, 3 when a
    run fails verification.
    """
    from capsule.errors import BadInputError
    from capsule.evidence.compare import compare_runs, comparison_renderer
    from capsule.report.comparison import refuse_existing, render_comparison, write_comparison_file
    from capsule.report.numbers import update_comparison_file

    if out is not None and update is not None:
        raise BadInputError("--out and --update: give one (--out writes a new file, --update rewrites one)")
    if out is not None:
        refuse_existing(out)
    if update is not None:
        count, changed = update_comparison_file(update, run_a, run_b, comparison_renderer(ledger_path, keys))
        click.echo(f"{update}: {count} comparison region(s) {'rewritten' if changed else 'already current'}")
        return
    result = compare_runs(run_a, run_b, ledger_path=ledger_path, keys=keys)
    for label in ("A", "B"):
        side = result.runs[label]
        click.echo(f"{label}: trusted {side.trusted_by}: {side.verified}", err=True)
    if out is not None:
        write_comparison_file(out, result, (run_a, run_b))
        click.echo(f"comparison: {out} (check it with `capsule check-numbers {out}`)", err=True)
    elif as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(render_comparison(result), nl=False)

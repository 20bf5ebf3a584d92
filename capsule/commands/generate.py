"""`capsule generate`: one arm of a sealed plan, or an ad-hoc arm with no plan, into a run directory.

Both forms write a proper run directory (`run.json`, `manifest.json`, `generations/`) and resume it
when the same command runs again:

- `--plan P --arm A`: the run directory `capsule reproduce --plan P` uses (the latest unfinished run
  of these plan bytes under `results/<plan>/`, else a new one), so reproduce continues from there.
- ad hoc (no `--plan`): the options become an `[[arms]]` table that the plan loader reads
  (`capsule.prereg.adhoc`), so they meet a sealed arm's rules. The run lands in
  `runs/adhoc/<run_id>/` with `adhoc.json`; its run.json marks it unsealed (`plan_path` "adhoc",
  ledger head "none").
- `--out DIR` names the run directory exactly; `--dry-run` runs the fake backend and tokenizer (no
  model) under `runs/dry-run/<plan or adhoc>/`, or in `DIR/dry-run`.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

import click

from capsule.atomic import check_output_dir, write_bytes_atomic
from capsule.commands.endpoint_option import endpoint_options
from capsule.errors import BadInputError, VerificationError
from capsule.generation.arm_runner import ArmResult, generate_arm
from capsule.generation.backends import ENDPOINT_KEY_ENV
from capsule.generation.backends.fake import DRY_RUN_MODEL, FakeChatTokenizer
from capsule.generation.targets import DEFAULT_FIRST, Target, adhoc_target, sealed_target
from capsule.hashing import sha256_file
from capsule.pipeline.opening import (
    OpenRun,
    open_run_dir,
    recorded_in,
    remove_unused_run,
    signed,
    start_manifest,
)
from capsule.prereg.adhoc import AdhocOptions, adhoc_bytes
from capsule.prereg.backend_specs import BACKENDS
from capsule.prereg.ledger import Ledger
from capsule.run_dir import RunDir

# The options that describe an ad-hoc arm (click parameter names); with --plan they are refused.
ADHOC_OPTIONS = (
    "backend", "dtype", "batch_size", "max_new_tokens", "keys_text", "first", "seed", "batch_order", "name"
)


def _keep_adhoc_record(run: RunDir, target: Target) -> None:
    """Write adhoc.json at the run's start; on resume check it still has the bytes run.json names."""
    if target.adhoc is None:
        return
    if not run.adhoc.exists():
        write_bytes_atomic(run.adhoc, adhoc_bytes(target.adhoc))
    elif sha256_file(run.adhoc) != target.plan_sha256:
        raise VerificationError(
            f"{run.adhoc}: differs from the run's plan_sha256; the run directory was edited"
        )


def generate_target(
    target: Target, out_dir: Path | None, progress: bool, endpoint: str | None = None,
    key_env: str = ENDPOINT_KEY_ENV,
) -> ArmResult:
    """Open (or resume) the target's run directory, fingerprint the machine, and generate the arm,
    holding the run directory's lock throughout."""
    sealed_run = target.adhoc is None and target.model_dir is not None  # a dry run is never recorded
    existed = out_dir is not None and os.path.lexists(out_dir)
    with ExitStack() as held:
        run = open_run_dir(
            results_root=target.results_root,
            plan_path=target.plan_path,
            plan_sha256=target.plan_sha256,
            ledger_head=target.ledger_head,
            held=held,
            explicit=out_dir,
            finished=recorded_in(Ledger.load()) if sealed_run else signed,
            option="--out",
        )
        try:
            return _generate_in(run, target, progress, endpoint, key_env)
        except Exception:  # a refusal, or a failure before any row: leave no empty run behind
            if not run.resumed and not existed:
                remove_unused_run(run.dir)
            raise


def _generate_in(
    run: OpenRun, target: Target, progress: bool, endpoint: str | None, key_env: str
) -> ArmResult:
    """generate_target's work once the run directory is open and locked."""
    click.echo(f"{'resuming' if run.resumed else 'new'} run {run.run_id} in {run.path}", err=True)
    _keep_adhoc_record(run.dir, target)
    digest = start_manifest(
        run, target.model_dir, target.prompts_path, lambda line: click.echo(line, err=True),
        "choose another --out",
    )
    return generate_arm(
        target.arm,
        prompts=target.prompts,
        keys=target.keys,
        model_dir=target.model_dir or DRY_RUN_MODEL,
        out_dir=run.path,
        plan_hash=target.plan_sha256,
        manifest_digest=digest,
        progress=progress,
        tokenizer=FakeChatTokenizer(supports_thinking=True) if target.model_dir is None else None,
        loader=target.loader,
        endpoint=endpoint,
        key_env=key_env,
    )


def _refuse_adhoc_options(ctx: click.Context) -> None:
    """With --plan the arm's settings are the plan's: an ad-hoc option given too would be ignored
    silently, so it is refused (BadInputError naming it)."""
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name in ADHOC_OPTIONS
        and ctx.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT
    ]
    if given:
        raise BadInputError(
            f"{', '.join(given)}: ad-hoc option(s); with --plan the arm's settings are the plan's, drop them"
        )


@click.command()
@click.option(
    "--plan", "plan_path", type=click.Path(path_type=Path), help="A sealed plan.toml (or its directory)."
)
@click.option("--arm", "arm_name", help="The plan's arm to run.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="The run directory itself: created, or resumed if it holds a run of the same plan or options "
    "(with --dry-run: DIR/dry-run). Without it: the latest unfinished run of the same plan or options, else "
    "a new one, under results/<plan>/ (--plan), runs/adhoc/ (ad hoc) or runs/dry-run/<plan or adhoc>/.",
)
@click.option(
    "--model-dir", type=click.Path(path_type=Path), help="Local model directory (else the plan's source)."
)
@click.option("--backend", default="hf", show_default=True, help=f"Ad-hoc: {' | '.join(BACKENDS)}.")
@click.option(
    "--dtype", default="bfloat16", show_default=True, type=click.Choice(["bfloat16", "float16", "float32"])
)
@click.option(
    "--batch-size", type=int, default=8, show_default=True, help="Ad-hoc: batch size (max_num_seqs)."
)
@click.option(
    "--max-new-tokens", type=int, default=32, show_default=True, help="Ad-hoc: new tokens per prompt."
)
@click.option("--keys", "keys_text", default=None, help="Ad-hoc: comma-separated prompt keys.")
@click.option(
    "--first",
    type=int,
    default=None,
    help=f"Ad-hoc, instead of --keys: the first N prompts (default {DEFAULT_FIRST}).",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Ad-hoc: arm seed (batch execution order)."
)
@click.option("--batch-order", type=click.Choice(["file", "length"]), default="file", show_default=True)
@click.option(
    "--name", default="adhoc", show_default=True, help="Ad-hoc: arm name (file name under generations/)."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Fake backend and tokenizer, no model: into runs/dry-run/<plan or adhoc>/ (or <out>/dry-run).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@endpoint_options
def generate(
    plan_path: Path | None,
    arm_name: str | None,
    out_dir: Path | None,
    model_dir: Path | None,
    backend: str,
    dtype: str,
    batch_size: int,
    max_new_tokens: int,
    keys_text: str | None,
    first: int | None,
    seed: int,
    batch_order: str,
    name: str,
    dry_run: bool,
    no_progress: bool,
    endpoint: str | None,
    endpoint_key_env: str,
) -> None:
    """Generate one arm into a run directory: `--plan P --arm A`, or ad hoc (greedy) from the options."""
    if plan_path is not None:
        if not arm_name:
            raise BadInputError("--plan needs --arm NAME")
        _refuse_adhoc_options(click.get_current_context())
        target = sealed_target(plan_path, arm_name, model_dir, dry_run)
    else:
        options = AdhocOptions(name, backend, dtype, batch_size, batch_order, seed, max_new_tokens)
        target = adhoc_target(options, keys_text, first, model_dir, dry_run, endpoint=endpoint is not None)
    if out_dir is not None:
        check_output_dir(out_dir, "--out directory")  # before a dry run's `dry-run/` is joined to it
    explicit = out_dir / "dry-run" if out_dir is not None and dry_run else out_dir
    result = generate_target(target, explicit, progress=not no_progress, endpoint=endpoint,
                             key_env=endpoint_key_env)  # fmt: skip
    state = "complete" if result.complete else f"partial ({result.reason})"
    click.echo(
        f"{result.rows_path}: {result.n_rows}/{result.n_keys} rows, {result.new_rows} new, "
        f"{result.new_tokens} tokens in {result.elapsed_s:.1f}s; {state}"
    )

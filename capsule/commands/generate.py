"""`capsule generate`: run one arm of a sealed plan, or an ad-hoc arm with no plan."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from capsule.errors import BadInputError


def _plan_arm(plan_path: Path, arm_name: str, model_dir: Path | None) -> tuple:
    """Load and verify the sealed plan; return (arm, keys, prompts, model_dir, plan_hash, name, loader)."""
    from capsule.artifacts.model_store import resolve_model_dir
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.generation.arm_runner import subset_keys
    from capsule.hashing import sha256_file
    from capsule.prereg.ledger import require_sealed
    from capsule.prereg.loader import load_plan
    from ifeval_scorer import load_prompts

    plan = load_plan(plan_path)
    record = require_sealed(plan.path)
    try:
        arm = plan.arm(arm_name)
    except KeyError as error:
        names = ", ".join(a.name for a in plan.arms)
        raise BadInputError(f"{plan.path}: no arm {arm_name!r}; arms: {names}") from error
    prompts_path = fetch_prompts().path
    if sha256_file(prompts_path) != plan.prompts.sha256:
        from capsule.errors import VerificationError

        raise VerificationError(f"{prompts_path}: sha256 differs from the plan's prompts.sha256")
    prompts = load_prompts(prompts_path)
    keys = subset_keys(plan.prompts.subsets[arm.subset], prompts)
    directory = resolve_model_dir(plan.model, model_dir)
    return arm, keys, prompts, directory, str(record["sha256"]), plan.name, plan.model.loader


def _adhoc_arm(
    backend: str,
    dtype: str,
    batch_size: int,
    max_new_tokens: int,
    keys_text: str,
    first: int,
    seed: int,
    order: str,
    name: str,
    model_dir: Path | None,
) -> tuple:
    """A greedy arm built from options, on the pinned prompts and the embedded model (or --model-dir)."""
    from capsule.artifacts.embedded_model import fetch_model
    from capsule.artifacts.model_store import verify_local_dir
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.prereg.plan import Arm, Decoding
    from ifeval_scorer import load_prompts

    prompts = load_prompts(fetch_prompts().path)
    if keys_text:
        try:
            keys = [int(k) for k in keys_text.split(",") if k.strip()]
        except ValueError as error:
            raise BadInputError(f"--keys {keys_text!r}: give comma-separated integer prompt keys") from error
    else:
        keys = list(prompts)[: first or None]
    if model_dir is None:
        model_dir = fetch_model()[0]
    else:
        verify_local_dir(model_dir)
    greedy = Decoding("greedy", 1.0, 1.0, 0, 0.0, 0.0, 1.0)
    arm = Arm(
        name=name,
        backend=backend,  # type: ignore[arg-type]
        subset="adhoc",
        dtype=dtype,  # type: ignore[arg-type]
        batch_size=batch_size,
        batch_order=order,  # type: ignore[arg-type]
        seed=seed,
        max_new_tokens=max_new_tokens,
        thinking="off",
        unclosed="empty",
        decoding=greedy,
        env={"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"} if backend == "vllm" else {},
    )
    return arm, keys, prompts, model_dir, "adhoc", "adhoc"


@click.command()
@click.option(
    "--plan", "plan_path", type=click.Path(path_type=Path), help="A sealed plan.toml (or its directory)."
)
@click.option("--arm", "arm_name", help="The plan's arm to run.")
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path), help="Run directory (default runs/<plan name>)."
)
@click.option(
    "--model-dir", type=click.Path(path_type=Path), help="Local model directory (else the plan's source)."
)
@click.option("--backend", default="hf", show_default=True, help="Ad-hoc: hf | vllm | fake.")
@click.option(
    "--dtype", default="bfloat16", show_default=True, type=click.Choice(["bfloat16", "float16", "float32"])
)
@click.option(
    "--batch-size", type=int, default=8, show_default=True, help="Ad-hoc: batch size (max_num_seqs)."
)
@click.option(
    "--max-new-tokens", type=int, default=32, show_default=True, help="Ad-hoc: new tokens per prompt."
)
@click.option("--keys", "keys_text", default="", help="Ad-hoc: comma-separated prompt keys.")
@click.option(
    "--first", type=int, default=8, show_default=True, help="Ad-hoc without --keys: the first N prompts."
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Ad-hoc: arm seed (batch execution order)."
)
@click.option("--batch-order", type=click.Choice(["file", "length"]), default="file", show_default=True)
@click.option(
    "--name", default="adhoc", show_default=True, help="Ad-hoc: arm name (file name under generations/)."
)
@click.option(
    "--dry-run", is_flag=True, help="Run the arm with the fake backend into <out>/dry-run (no model)."
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def generate(
    plan_path: Path | None,
    arm_name: str | None,
    out_dir: Path | None,
    model_dir: Path | None,
    backend: str,
    dtype: str,
    batch_size: int,
    max_new_tokens: int,
    keys_text: str,
    first: int,
    seed: int,
    batch_order: str,
    name: str,
    dry_run: bool,
    no_progress: bool,
) -> None:
    """Generate one arm: `--plan P --arm A`, or ad hoc (greedy) with --backend/--batch-size/--keys --out."""
    from capsule.generation.arm_runner import generate_arm

    loader: str | None = None  # ad hoc: the checkpoint's config.json decides
    if plan_path is not None:
        if not arm_name:
            raise BadInputError("--plan needs --arm NAME")
        arm, keys, prompts, directory, plan_hash, plan_name, loader = _plan_arm(
            plan_path, arm_name, model_dir
        )
        out_dir = out_dir or Path("runs") / plan_name
    else:
        if out_dir is None:
            raise BadInputError("an ad-hoc run needs --out DIR (or use --plan P --arm A)")
        arm, keys, prompts, directory, plan_hash, _ = _adhoc_arm(
            backend, dtype, batch_size, max_new_tokens, keys_text, first, seed, batch_order, name, model_dir
        )
    if dry_run:
        arm = dataclasses.replace(arm, backend="fake", backend_options={}, env={})
        out_dir = out_dir / "dry-run"
    result = generate_arm(
        arm,
        prompts=prompts,
        keys=keys,
        model_dir=directory,
        out_dir=out_dir,
        plan_hash=plan_hash,
        manifest_digest="",
        progress=not no_progress,
        loader=loader,
    )
    state = "complete" if result.complete else f"partial ({result.reason})"
    click.echo(
        f"{result.rows_path}: {result.n_rows}/{result.n_keys} rows, {result.new_rows} new, "
        f"{result.new_tokens} tokens in {result.elapsed_s:.1f}s; {state}"
    )

"""`capsule manifest`: fingerprint this machine; `capsule manifest diff A B`: compare two machines."""

from __future__ import annotations

from pathlib import Path

import click

from capsule.commands.options import ledger_option, pinned_keys_option
from capsule.jsonio import dumps_document
from capsule.machine.diff import format_diff
from capsule.machine.manifest import build_manifest, diff_manifests, write_manifest


@click.group(invoke_without_command=True)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=True, path_type=Path),
    help="Write the manifest here (a file, or a run directory for manifest.json); default stdout.",
)
@click.option(
    "--model-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Model directory to fingerprint (every file's sha256); default: none.",
)
@click.option(
    "--prompts",
    "prompts_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Prompt file to fingerprint (sha256); default: none.",
)
@click.option(
    "--import-torch",
    is_flag=True,
    help="Import torch to record its live TF32 / determinism / attention flags (adds 2-4 s).",
)
@click.pass_context
def manifest(
    ctx: click.Context,
    out: Path | None,
    model_dir: Path | None,
    prompts_path: Path | None,
    import_torch: bool,
) -> None:
    """Fingerprint this machine's hardware, software, numerics settings, model and data as JSON."""
    if ctx.invoked_subcommand is not None:
        return

    built = build_manifest(model_dir=model_dir, prompts_path=prompts_path, import_torch=import_torch)
    if out is None:
        click.echo(dumps_document(built), nl=False)
        return
    digest = write_manifest(out, built)
    click.echo(
        f"manifest: {out} (sha256 {digest}, {len(built['gpus'])} GPU(s), "
        f"built in {built['capture']['elapsed_s']} s)",
        err=True,
    )


@manifest.command("diff")
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@click.option(
    "--fail-on",
    type=click.Choice(["numerics", "never"]),
    default="never",
    show_default=True,
    help="Exit 1 when a difference that can change numerics exists.",
)
@click.option(
    "--arm", default=None, metavar="NAME",
    help="Run directories: the machine that generated this arm in each (a cluster node's, with lanes).",
)
@ledger_option("The ledger a run directory is verified against (it must exist).")
@pinned_keys_option("Pin the public key PEM that signed a run directory (repeatable), as `verify --key`.")
def diff(
    a: Path, b: Path, as_json: bool, fail_on: str, arm: str | None, ledger_path: Path, keys: tuple[Path, ...]
) -> None:
    """Compare two manifests (files, or run directories, whose runs are verified first as `capsule
    verify` checks them): what can change numerics, and what cannot. Exit 3 for a run directory that
    is unsigned or fails verification."""
    from capsule.evidence.run_manifests import diff_side

    side_a, side_b = diff_side(a, ledger_path, keys, arm), diff_side(b, ledger_path, keys, arm)
    for label, side in (("A", side_a), ("B", side_b)):
        click.echo(f"{label}: {side.trust}", err=True)
    result = diff_manifests(side_a.manifest, side_b.manifest)
    if as_json:
        trust = {"a": side_a.trust, "b": side_b.trust}
        click.echo(dumps_document({"a": str(a), "b": str(b), "trust": trust, **result.to_dict()}), nl=False)
    else:
        click.echo(format_diff(result, label_a=str(a), label_b=str(b)), nl=False)
    if fail_on == "numerics" and result.has_numerics:
        click.get_current_context().exit(1)

"""`capsule keygen [--out DIR]`: make the Ed25519 key pair that signs result bundles."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Directory for signing.key.pem (mode 0600) and signing.pub.pem [default: the user config dir].",
)
@click.option("--force", is_flag=True, help="Replace an existing key pair in that directory.")
def keygen(out_dir: Path | None, force: bool) -> None:
    """Generate an Ed25519 signing key pair for result bundles."""
    from capsule.evidence.signing import KEY_ENV, default_key_dir, generate_keypair

    pair = generate_keypair(out_dir, overwrite=force)
    click.echo(f"private key: {pair.private_path} (mode 0600; keep it secret)")
    click.echo(f"public key:  {pair.public_path}")
    click.echo(f"fingerprint: {pair.fingerprint}")
    if out_dir is not None and out_dir.resolve() != default_key_dir().resolve():
        click.echo(f"sign with it: export {KEY_ENV}={pair.private_path}")

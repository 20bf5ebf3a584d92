"""`capsule keygen` and `load_signing_key`: 0600 private keys, the key search order, ephemeral keys."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.errors import BadInputError
from capsule.evidence.signing import (
    KEY_ENV,
    PRIVATE_KEY_NAME,
    PUBLIC_KEY_NAME,
    default_key_dir,
    fingerprint_of,
    generate_keypair,
    load_signing_key,
    read_public_key,
)


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the user config dir into tmp_path and clear $CAPSULE_SIGNING_KEY: never touch real keys."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert str(default_key_dir()).startswith(str(tmp_path))
    return tmp_path / "config"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keygen_cli_writes_0600_private_key(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    result = CliRunner().invoke(cli, ["keygen", "--out", str(out)])
    assert result.exit_code == 0, result.output
    private, public = out / PRIVATE_KEY_NAME, out / PUBLIC_KEY_NAME
    assert _mode(private) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    fingerprint = fingerprint_of(read_public_key(public))
    assert f"fingerprint: {fingerprint}" in result.output and f"{KEY_ENV}={private}" in result.output


def test_keygen_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        private, _, _ = generate_keypair(tmp_path / "keys")
    finally:
        os.umask(previous)
    assert _mode(private) == 0o600


def test_keygen_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    first = generate_keypair(out)
    result = CliRunner().invoke(cli, ["keygen", "--out", str(out)])
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert fingerprint_of(read_public_key(first.public_path)) == first.fingerprint
    forced = CliRunner().invoke(cli, ["keygen", "--out", str(out), "--force"])
    assert forced.exit_code == 0 and first.fingerprint not in forced.output
    assert _mode(out / PRIVATE_KEY_NAME) == 0o600


def test_keygen_default_location_is_the_user_config_dir() -> None:
    result = CliRunner().invoke(cli, ["keygen"])
    assert result.exit_code == 0, result.output
    assert _mode(default_key_dir() / PRIVATE_KEY_NAME) == 0o600


def test_load_signing_key_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = generate_keypair()
    signer, description = load_signing_key(None)
    assert fingerprint_of(signer.public_key) == default.fingerprint and "default location" in description
    other = generate_keypair(tmp_path / "other")
    monkeypatch.setenv(KEY_ENV, str(other.private_path))
    signer, description = load_signing_key(None)
    assert fingerprint_of(signer.public_key) == other.fingerprint and f"${KEY_ENV}" in description
    signer, description = load_signing_key(default.private_path)
    assert fingerprint_of(signer.public_key) == default.fingerprint and "given" in description


def test_no_key_anywhere_makes_an_ephemeral_one_and_says_so() -> None:
    first, description = load_signing_key(None)
    second, _ = load_signing_key(None)
    assert "EPHEMERAL" in description and "capsule keygen" in description
    assert fingerprint_of(first.public_key) != fingerprint_of(second.public_key)
    assert not (default_key_dir() / PRIVATE_KEY_NAME).exists()


def test_a_key_asked_for_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "missing.pem"))
    with pytest.raises(BadInputError, match="does not exist"):
        load_signing_key(None)
    with pytest.raises(BadInputError, match="does not exist"):
        load_signing_key(tmp_path / "also-missing.pem")


def test_non_ed25519_or_garbage_key_is_refused(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    ecdsa = tmp_path / "ecdsa.pem"
    ecdsa.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    with pytest.raises(BadInputError, match="expected an Ed25519 private key"):
        load_signing_key(ecdsa)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    with pytest.raises(BadInputError, match="not a readable"):
        load_signing_key(garbage)


def test_readable_private_key_is_flagged(tmp_path: Path) -> None:
    pair = generate_keypair(tmp_path / "keys")
    pair.private_path.chmod(0o644)
    _, description = load_signing_key(pair.private_path)
    assert "chmod 600" in description

"""Ed25519 keys and DSSE envelopes: the signing half of a result bundle (securesystemslib).

A key's fingerprint is the sha256 of its DER SubjectPublicKeyInfo; it doubles as the DSSE keyid, so
an envelope, a `bundle.pub.pem` and a ledger `bundle` entry name the same key the same way.
Private keys are PKCS#8 PEM files (mode 0600), public keys SubjectPublicKeyInfo PEM files.
"""

from __future__ import annotations

import copy
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from securesystemslib import exceptions as sslib_exceptions
from securesystemslib.dsse import Envelope
from securesystemslib.signer import ED25519, KEY_TYPE_ED25519, CryptoSigner, SSlibKey

from capsule.atomic import make_directory, write_bytes_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.hashing import sha256_bytes
from capsule.jsonio import read_input_bytes

SigningKey = CryptoSigner  # what `make_bundle` signs with

KEY_ENV = "CAPSULE_SIGNING_KEY"  # path to a private key PEM; overrides the default location
PRIVATE_KEY_NAME = "signing.key.pem"  # under default_key_dir() or `capsule keygen --out DIR`
PUBLIC_KEY_NAME = "signing.pub.pem"
PAYLOAD_TYPE = "application/vnd.in-toto+json"  # DSSE payload type for in-toto Statements
PEM_LIMIT = 64 * 1024  # an Ed25519 key PEM is under 200 bytes; a larger file is not a key


@dataclass(frozen=True)
class KeyPair:
    """Where `generate_keypair` wrote a key pair, and the public key's fingerprint."""
    private_path: Path
    public_path: Path
    fingerprint: str

    def __iter__(self):  # type: ignore[no-untyped-def]
        """Unpack as `(private_path, public_path, fingerprint)`."""
        return iter((self.private_path, self.public_path, self.fingerprint))


def default_key_dir() -> Path:
    """The per-user key directory, `platformdirs.user_config_dir("capsule")/signing`."""
    import platformdirs

    return Path(platformdirs.user_config_dir("capsule")) / "signing"


def _crypto_public(key: SSlibKey) -> Any:
    return key._crypto_key()  # securesystemslib's own pyca object for this key


def public_key_pem(key: SSlibKey) -> bytes:
    """The SubjectPublicKeyInfo PEM of `key`: the exact bytes written as `bundle.pub.pem`."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return _crypto_public(key).public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)  # type: ignore[no-any-return]


def fingerprint_of(key: SSlibKey) -> str:
    """Hex sha256 of the key's DER SubjectPublicKeyInfo (`openssl pkey -pubin -outform DER | sha256sum`)."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return sha256_bytes(_crypto_public(key).public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def _sslib_key(public_key: Any) -> SSlibKey:
    """Wrap a pyca Ed25519 public key as an SSlibKey whose keyid is its fingerprint."""
    provisional = SSlibKey.from_crypto(public_key, keyid="provisional", scheme=ED25519)
    return SSlibKey(fingerprint_of(provisional), KEY_TYPE_ED25519, ED25519, provisional.keyval)


def _signer(private_key: Any) -> CryptoSigner:
    return CryptoSigner(private_key, _sslib_key(private_key.public_key()))


def generate_signer() -> CryptoSigner:
    """A fresh in-memory Ed25519 signer (used for ephemeral keys and by `generate_keypair`)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return _signer(Ed25519PrivateKey.generate())


def _write_private(path: Path, data: bytes) -> None:
    """Create `path` with mode 0600 from the start (never briefly world-readable), then fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it, but make the mode explicit anyway
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def generate_keypair(out_dir: Path | None = None, *, overwrite: bool = False) -> KeyPair:
    """Write a new Ed25519 key pair into `out_dir` (default: `default_key_dir()`); private key mode 0600.

    Refuses to replace an existing key unless `overwrite`: a lost private key cannot sign again
    under the fingerprint already recorded in ledgers.
    """
    directory = out_dir if out_dir is not None else default_key_dir()
    private_path, public_path = directory / PRIVATE_KEY_NAME, directory / PUBLIC_KEY_NAME
    if not overwrite:
        for existing in (private_path, public_path):
            if existing.exists():
                raise BadInputError(f"{existing} already exists; choose another --out DIR or pass --force")
    make_directory(directory, "key directory", mode=0o700)
    signer = generate_signer()
    private_path.unlink(missing_ok=True)
    _write_private(private_path, signer.private_bytes)
    write_bytes_atomic(public_path, public_key_pem(signer.public_key))
    return KeyPair(private_path, public_path, fingerprint_of(signer.public_key))


def read_private_key(path: Path) -> CryptoSigner:
    """Load an Ed25519 private key PEM (PKCS#8, unencrypted) as a signer."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        pem = read_input_bytes(path, "private key", limit=PEM_LIMIT)
        private_key = load_pem_private_key(pem, password=None)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise BadInputError(f"{path}: not a readable unencrypted PEM private key ({error})") from error
    if not isinstance(private_key, Ed25519PrivateKey):
        raise BadInputError(f"{path}: expected an Ed25519 private key; make one with `capsule keygen`")
    return _signer(private_key)


def load_signing_key(path: Path | None = None) -> tuple[CryptoSigner, str]:
    """The key `capsule reproduce` signs with, and one line saying which key it is.

    Order: `path`, then `$CAPSULE_SIGNING_KEY`, then `default_key_dir()/signing.key.pem`. A path that
    was asked for explicitly (argument or environment) must exist. When no key exists at the default
    location an ephemeral key is made in memory and the description says so (the caller prints it):
    such a bundle verifies only against its included public key.
    """
    source = "given"
    if path is None and os.environ.get(KEY_ENV):
        path, source = Path(os.environ[KEY_ENV]).expanduser(), f"${KEY_ENV}"
    if path is not None and not path.is_file():
        raise BadInputError(f"signing key {path} ({source}) does not exist; run `capsule keygen` or fix it")
    if path is None:
        default = default_key_dir() / PRIVATE_KEY_NAME
        if not default.is_file():
            signer = generate_signer()
            return signer, (
                f"signing with an EPHEMERAL Ed25519 key {fingerprint_of(signer.public_key)}: no key at "
                f"${KEY_ENV} or {default}; run `capsule keygen` for a persistent one"
            )
        path, source = default, "default location"
    signer = read_private_key(path)
    description = f"signing with Ed25519 key {fingerprint_of(signer.public_key)} from {path} ({source})"
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        description += f"; warning: its mode is {mode:04o}, run `chmod 600 {path}`"
    return signer, description


def read_public_key(path: Path) -> SSlibKey:
    """Load an Ed25519 public key PEM; a malformed or non-Ed25519 key is a verification failure."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        public_key = load_pem_public_key(
            read_input_bytes(path, "public key", error=VerificationError, limit=PEM_LIMIT)
        )
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise VerificationError(f"{path}: not a readable PEM public key ({error})") from error
    if not isinstance(public_key, Ed25519PublicKey):
        raise VerificationError(f"{path}: expected an Ed25519 public key, found {type(public_key).__name__}")
    return _sslib_key(public_key)


def sign_payload(payload: bytes, signer: CryptoSigner) -> dict[str, Any]:
    """A DSSE envelope (as a JSON-ready dict) over an in-toto `payload`, signed by `signer`."""
    envelope = Envelope(payload, PAYLOAD_TYPE, {})
    envelope.sign(signer)
    return envelope.to_dict()


def _check_envelope_shape(envelope: Any, where: str) -> None:
    """A DSSE envelope's fields have the JSON types DSSE gives them (strings; signatures a list of
    objects with string `keyid` and `sig`), checked before the library reads them."""
    if not isinstance(envelope, dict):
        raise VerificationError(f"{where}: malformed DSSE envelope (not a JSON object)")
    for field in ("payload", "payloadType"):
        if not isinstance(envelope.get(field), str):
            raise VerificationError(f"{where}: malformed DSSE envelope (field {field!r} must be a string)")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list):
        raise VerificationError(f"{where}: malformed DSSE envelope (field 'signatures' must be an array)")
    for index, signature in enumerate(signatures):
        if not isinstance(signature, dict) or not all(
            isinstance(signature.get(field), str) for field in ("keyid", "sig")
        ):
            raise VerificationError(
                f"{where}: malformed DSSE envelope (signatures[{index}] needs string 'keyid' and 'sig')"
            )


def verify_envelope(envelope: dict[str, Any], key: SSlibKey, where: str) -> bytes:
    """Check a DSSE envelope's signature by `key` and return its payload; VerificationError otherwise."""
    _check_envelope_shape(envelope, where)
    try:
        parsed = Envelope.from_dict(copy.deepcopy(envelope))  # from_dict mutates its input
    except (KeyError, TypeError, ValueError, AttributeError, sslib_exceptions.FormatError) as error:
        raise VerificationError(f"{where}: malformed DSSE envelope ({error!r})") from error
    if parsed.payload_type != PAYLOAD_TYPE:
        raise VerificationError(f"{where}: payloadType is {parsed.payload_type!r}, expected {PAYLOAD_TYPE!r}")
    if key.keyid not in parsed.signatures:
        found = ", ".join(sorted(parsed.signatures)) or "none"
        raise VerificationError(f"{where}: no signature by key {key.keyid} (signed by: {found})")
    try:
        parsed.verify([key], 1)
    except (sslib_exceptions.VerificationError, sslib_exceptions.UnverifiedSignatureError) as error:
        raise VerificationError(f"{where}: signature does not verify with key {key.keyid}") from error
    return parsed.payload

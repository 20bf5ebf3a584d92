"""A pinned file from a URL: downloaded into a scratch file, checked by sha256, then moved into place.

Shared by every artifact that has a published URL (the IFEval prompts, Google's GPT-4 responses).
The bytes are verified before `destination` is touched, so a wrong or partial download never lands
in the cache; a host without internet fails within `timeout_s` (name resolution fails at once).
"""

from __future__ import annotations

import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from capsule.atomic import copy_atomic
from capsule.errors import CapsuleError, VerificationError
from capsule.hashing import sha256_file


@dataclass(frozen=True)
class Fetched:
    """Where a pinned artifact now lies, and which source supplied it."""

    path: Path
    source: str


def verify_file(path: Path, expected: str) -> None:
    """Raise VerificationError (`path: sha256 got, expected want`) unless the file's hash matches."""
    got = sha256_file(path)
    if got != expected:
        raise VerificationError(f"{path}: sha256 {got}, expected {expected}")


def download_verified(url: str, destination: Path, expected: str, timeout_s: float) -> None:
    """Download `url`, check its sha256 against `expected`, and only then copy it to `destination`.

    Raises OSError (urllib's URLError among them) when the URL cannot be reached in `timeout_s`, and
    VerificationError when it serves other bytes.
    """
    with tempfile.TemporaryDirectory(prefix="capsule-url-") as scratch:
        target = Path(scratch) / "download"
        with urllib.request.urlopen(url, timeout=timeout_s) as response, open(target, "wb") as out:
            out.write(response.read())
        verify_file(target, expected)
        copy_atomic(target, destination)


def try_url(
    url: str, destination: Path, expected: str, timeout_s: float, failures: list[str]
) -> Fetched | None:
    """The last source of a fetch: `download_verified`, or None with `URL <url>: <why>` added to
    `failures` (unreachable, or other bytes), so the caller can name every source it tried."""
    try:
        download_verified(url, destination, expected, timeout_s)
    except (OSError, CapsuleError) as error:
        failures.append(f"URL {url}: {error}")
        return None
    return Fetched(destination, f"URL {url}")

"""Canonical JSON and sha256: the one place the capsule computes hashes."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks so large weight files need little memory. A path
    that is not a regular file (a FIFO would block, a device never ends) is a BadInputError."""
    digest = hashlib.sha256()
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise BadInputError(f"{path}: is not a regular file (a FIFO, a device or a socket); give a file")
    with os.fdopen(descriptor, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def canonical_json(value: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no whitespace, so equal values always hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_json(value: Any) -> str:
    """Hex sha256 of the canonical JSON of `value`."""
    return sha256_bytes(canonical_json(value))


def sha256_ids(token_ids: list[int]) -> str:
    """Hex sha256 of a token-id list, as recorded per generation row to prove identical inputs."""
    return sha256_json(token_ids)

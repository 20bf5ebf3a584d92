"""Canonical JSON and sha256: the one place the capsule computes hashes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in chunks so large weight files need little memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
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

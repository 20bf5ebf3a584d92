"""Google's published GPT-4 responses to the 541 IFEval prompts, the scorer's parity fixture.

Sources, in order, each verified by the sha256 pinned in `capsule.pins`: `$CAPSULE_SHARED/ifeval/`,
the shared directories the caller names (the test suite names `../shared/ifeval/` beside the
checkout), the cache, then google-research's raw file on machines with internet (saved into the
cache). A copy with other bytes is a VerificationError, never skipped over; no source at all is an
UnavailableError naming each one tried, which the tests turn into a skip.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from capsule.artifacts.cache import cache_dir
from capsule.artifacts.download import Fetched, try_url, verify_file
from capsule.errors import UnavailableError
from capsule.pins import GPT4_RESPONSES_FILE, GPT4_RESPONSES_SHA256, GPT4_RESPONSES_URL

SHARED_ENV = "CAPSULE_SHARED"  # a directory holding ifeval/<GPT4_RESPONSES_FILE>
SHARED_SUBDIR = "ifeval"
URL_TIMEOUT_S = 5  # a host without internet must give up within seconds (the tests then skip)


def gpt4_cache_path() -> Path:
    """Where a downloaded copy of the GPT-4 responses lives in the cache."""
    return cache_dir() / GPT4_RESPONSES_FILE


def shared_candidates(shared_dirs: Sequence[Path]) -> list[Path]:
    """The shared-directory paths to look at, `$CAPSULE_SHARED` first, without repeats."""
    roots = ([Path(os.environ[SHARED_ENV])] if os.environ.get(SHARED_ENV) else []) + list(shared_dirs)
    paths: list[Path] = []
    for root in roots:
        path = root.expanduser() / SHARED_SUBDIR / GPT4_RESPONSES_FILE
        if path not in paths:
            paths.append(path)
    return paths


def fetch_gpt4_responses(
    shared_dirs: Sequence[Path] = (), *, url: str | None = GPT4_RESPONSES_URL
) -> Fetched:
    """The verified GPT-4 responses file and its source (see the module docstring for the order).

    `url=None` skips the download (for a caller that must stay offline).
    """
    tried: list[str] = []
    for path in shared_candidates(shared_dirs):
        if path.is_file():
            verify_file(path, GPT4_RESPONSES_SHA256)
            return Fetched(path, f"shared {path}")
        tried.append(f"{path}: absent")
    cached = gpt4_cache_path()
    if cached.is_file():
        verify_file(cached, GPT4_RESPONSES_SHA256)
        return Fetched(cached, "cache")
    tried.append(f"cache {cached}: absent")
    if url is not None:
        downloaded = try_url(url, cached, GPT4_RESPONSES_SHA256, URL_TIMEOUT_S, tried)
        if downloaded is not None:
            return downloaded
    raise UnavailableError(
        f"{GPT4_RESPONSES_FILE} unavailable ({'; '.join(tried)}); set {SHARED_ENV} to a directory "
        f"holding {SHARED_SUBDIR}/{GPT4_RESPONSES_FILE}"
    )

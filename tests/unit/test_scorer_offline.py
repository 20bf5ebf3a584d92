"""Offline NLTK data and seeded language detection: materialized files, permissions, parity."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ifeval_scorer import nltk_data
from ifeval_scorer.detect import detect_language


def test_materializes_four_private_punkt_tab_files(tmp_path: Path) -> None:
    root = nltk_data.materialize(tmp_path / "nltk")
    english = root / "tokenizers" / "punkt_tab" / "english"
    assert sorted(p.name for p in english.iterdir()) == [
        "abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt"]
    for directory in (root, english):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for file in english.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) & 0o077 == 0
    before = {p.name: p.read_bytes() for p in english.iterdir()}
    (english / "abbrev_types.txt").write_text("tampered\n")
    nltk_data.materialize(root)  # rewrites what differs
    assert {p.name: p.read_bytes() for p in english.iterdir()} == before


def test_nltk_reads_our_files_and_never_downloads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import nltk
    from nltk.tokenize.punkt import load_punkt_params

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("download attempted")

    monkeypatch.setattr(nltk, "download", refuse)
    root = nltk_data.ensure_nltk_data()
    assert nltk.data.path[0] == str(root)
    found = Path(nltk.data.find("tokenizers/punkt_tab/english/"))
    assert found.is_relative_to(root)
    params = load_punkt_params(str(found))
    assert "dr" in params.abbrev_types and "however" in params.sent_starters
    from ifeval_scorer.text import count_sentences, word_tokens

    assert count_sentences("Dr. Smith arrived. He sat down.") == 2
    assert word_tokens("HELLO, world.") == ("HELLO", ",", "world", ".")


def test_a_changed_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from ifeval_scorer.errors import ScorerVerificationError

    monkeypatch.setattr(nltk_data, "PUNKT_MEMBER_SHA256", "0" * 64)
    with pytest.raises(ScorerVerificationError, match="sha256"):
        nltk_data.english_model()


TEXTS = ["", "   ", "12345", "HELLO WORLD THIS IS LOUD", "Bonjour tout le monde, ça va?", "Привет, мир!",
         "こんにちは世界", "हिन्दी भाषा में लिखा गया", "ABC def GHI jkl", "a b c d e", "Ẩn  tiếng Việt",
         "see http://example.com or mail me@example.org now", "ΑΒΓ Ἀθῆναι"]


def test_detection_equals_langdetect(gpt4_fixture: Path) -> None:
    import langdetect
    from langdetect import detector_factory

    def reference(text: str, seed: int) -> str | None:
        detector_factory.init_factory()
        detector = detector_factory._factory.create()
        detector.seed = seed
        detector.append(text)
        try:
            return str(detector.detect())
        except langdetect.LangDetectException:
            return None

    rows = [json.loads(line) for line in gpt4_fixture.read_text().splitlines()[:40]]
    texts = TEXTS + [row["response"] for row in rows]
    for seed in (0, 11):
        assert [detect_language(t, seed) for t in texts] == [reference(t, seed) for t in texts]


def test_unseeded_detection_is_not_memoized() -> None:
    # A short ambiguous text: unseeded runs may disagree; seeded runs never do.
    text = "ok si no"
    assert len({detect_language(text, 4) for _ in range(5)}) == 1
    assert {detect_language(text, None) for _ in range(30)} <= {None, *set(
        __import__("langdetect").detector_factory._factory.langlist)}

"""Language detection that gives exactly `langdetect.detect`'s answers, seeded per call, faster.

`langdetect` (1.0.9) draws random n-grams from the text and multiplies per-language probabilities;
each detector reseeds its own `random.Random` from `DetectorFactory.seed` before detecting. Upstream
IFEval never sets that seed, so its language verdicts can change from run to run. Here the seed is
an argument, and no global state is touched.

This module re-implements langdetect's procedure (text normalisation, n-gram extraction, seven
trials of random n-gram updates, normalisation every fifth step, the 0.1 reporting threshold) on
langdetect's own profiles and character normaliser. The probability update runs on numpy vectors:
each element sees the same IEEE operations in the same order as langdetect's Python loop (the
normalising sum is still Python's `sum`), so results are bit-identical; the parity tests check it
against `langdetect.detect` itself. It is the scorer's hot spot, hence the care.

A seeded detection is a pure function of (text, seed), so it is memoized; an unseeded one is not,
because repeating it is exactly what upstream does (and what the scorer-stability control measures).
"""

from __future__ import annotations

import random
import re
import threading
from functools import lru_cache
from typing import Any

import numpy as np

_CACHE_SIZE = 4096
_WORD_CACHE_SIZE = 200_000
_N_TRIAL = 7
_ALPHA = 0.5
_ALPHA_WIDTH = 0.05
_ITERATION_LIMIT = 1000
_PROB_THRESHOLD = 0.1
_CONV_THRESHOLD = 0.99999
_BASE_FREQ = 10000
_MAX_TEXT_LENGTH = 10000
_SPACES = re.compile(" {2,}")
_LATIN = re.compile("[A-z]")  # langdetect's test: "A" <= ch <= "z"
_NON_LATIN = re.compile("[\u0300-\U0010ffff]")

_lock = threading.Lock()
_profiles: _Profiles | None = None


class _Profiles:
    """langdetect's loaded profiles, with per-n-gram probability vectors made on first use."""

    def __init__(self) -> None:
        from langdetect import detector_factory
        from langdetect.detector import Detector
        from langdetect.utils.ngram import NGram

        detector_factory.init_factory()
        factory: Any = detector_factory._factory
        self.word_probs: dict[str, list[float]] = factory.word_lang_prob_map
        self.langs: list[str] = list(factory.langlist)
        self.vectors: dict[str, np.ndarray] = {}
        self.url = Detector.URL_RE
        self.mail = Detector.MAIL_RE
        self.normalize_vi = NGram.normalize_vi
        self.normalizer = _Normalizer(NGram.normalize)
        self.word_cache: dict[tuple[str, bool], list[str]] = {}

    def vector(self, gram: str) -> np.ndarray:
        found = self.vectors.get(gram)
        if found is None:
            found = self.vectors[gram] = np.array(self.word_probs[gram], dtype=np.float64)
        return found


def _load() -> _Profiles:
    global _profiles
    with _lock:
        if _profiles is None:
            _profiles = _Profiles()
        return _profiles


def _prepare(profiles: _Profiles, text: str) -> str:
    """langdetect's `append` then `cleaning_text`: URLs, mails out; spaces collapsed; Latin dropped
    from mostly non-Latin text.

    langdetect means to exclude Latin Extended Additional from the non-Latin count, but compares a
    block number with a block name, so every character from U+0300 up counts; so it does here.
    """
    text = profiles.url.sub(" ", text)
    text = profiles.mail.sub(" ", text)
    text = profiles.normalize_vi(text)
    text = _SPACES.sub(" ", text[:_MAX_TEXT_LENGTH])
    latin = len(_LATIN.findall(text))
    non_latin = len(_NON_LATIN.findall(text))
    if latin * 2 < non_latin:
        text = _LATIN.sub("", text)
    return text


class _Normalizer(dict[int, str]):
    """A `str.translate` table applying langdetect's per-character normaliser, filled on demand."""

    def __init__(self, normalize: Any) -> None:
        super().__init__()
        self._normalize = normalize

    def __missing__(self, code: int) -> str:
        value: str = self._normalize(chr(code))
        self[code] = value
        return value


def _word_grams(known: Any, word: str, followed_by_space: bool) -> list[str]:
    """The known n-grams langdetect emits while reading `word` (and the space after it, if any).

    Reading starts after a space, so the buffer is `" " + word` cut to its last three characters;
    a character in capitals right after another emits nothing (langdetect skips words in capitals).
    """
    padded = " " + word
    found: list[str] = []
    previous_upper = False
    for k, ch in enumerate(word):
        upper = ch.isupper()
        if not (upper and previous_upper):
            for gram in (ch, padded[k : k + 2], padded[k - 1 : k + 2] if k else ""):
                if gram and gram in known:
                    found.append(gram)
        previous_upper = upper
    if followed_by_space:
        for gram in (word[-1] + " ", padded[-2:] + " "):
            if gram in known:
                found.append(gram)
    return found


def _ngrams(profiles: _Profiles, text: str) -> list[str]:
    """The known 1- to 3-grams langdetect extracts, in its order (words in capitals skipped)."""
    words = text.translate(profiles.normalizer).split(" ")
    cache = profiles.word_cache
    result: list[str] = []
    last = len(words) - 1
    for index, word in enumerate(words):
        if not word:
            continue
        key = (word, index != last)
        grams = cache.get(key)
        if grams is None:
            if len(cache) >= _WORD_CACHE_SIZE:
                cache.clear()
            grams = cache[key] = _word_grams(profiles.word_probs, word, index != last)
        result.extend(grams)
    return result


def _run_trials(profiles: _Profiles, grams: list[str], rng: random.Random) -> np.ndarray:
    """langdetect's seven trials, averaged: per-language probabilities for the n-grams `grams`.

    The n-gram pick is `random.choice(grams)` written out (`getrandbits` with rejection, exactly
    what `Random.choice` does through `_randbelow`) to save two calls per step.
    """
    n_langs = len(profiles.langs)
    n_grams = len(grams)
    bits = n_grams.bit_length()
    getrandbits = rng.getrandbits
    vectors = profiles.vectors
    vector = profiles.vector
    add, multiply, divide = np.add, np.multiply, np.divide
    total = np.zeros(n_langs)
    scratch = np.empty(n_langs)
    for _ in range(_N_TRIAL):
        prob = np.full(n_langs, 1.0 / n_langs)
        weight = (_ALPHA + rng.gauss(0.0, 1.0) * _ALPHA_WIDTH) / _BASE_FREQ
        step = 0
        while True:
            index = getrandbits(bits)
            while index >= n_grams:
                index = getrandbits(bits)
            gram = grams[index]
            add(weight, vectors[gram] if gram in vectors else vector(gram), out=scratch)
            multiply(prob, scratch, out=prob)
            if step % 5 == 0:
                divide(prob, sum(prob.tolist()), out=prob)
                if prob.max() > _CONV_THRESHOLD or step >= _ITERATION_LIMIT:
                    break
            step += 1
        total += prob / _N_TRIAL
    return total


def _detect_once(text: str, seed: int | None) -> str | None:
    profiles = _load()
    grams = _ngrams(profiles, _prepare(profiles, text))
    if not grams:
        return None  # langdetect raises "No features in text."
    total = _run_trials(profiles, grams, random.Random(seed))
    best: str | None = None
    best_p = _PROB_THRESHOLD
    for lang, p in zip(profiles.langs, total.tolist(), strict=True):
        if p > best_p:  # the first of equal maxima wins, as in langdetect's stable sort
            best, best_p = lang, p
    return best if best is not None else "unknown"


@lru_cache(maxsize=_CACHE_SIZE)
def _detect_seeded(text: str, seed: int) -> str | None:
    return _detect_once(text, seed)


def detect_language(text: str, seed: int | None) -> str | None:
    """The ISO 639-1 code `langdetect.detect(text)` gives under `seed`; None where it finds no features.

    `seed=None` draws a fresh seed from the OS on each call, as upstream IFEval does.
    """
    if seed is None:
        return _detect_once(text, None)
    return _detect_seeded(text, seed)


def clear_cache() -> None:
    """Forget memoized detections and per-word n-grams (for cold-start timings)."""
    _detect_seeded.cache_clear()
    if _profiles is not None:
        _profiles.word_cache.clear()

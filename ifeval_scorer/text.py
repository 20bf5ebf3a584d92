"""Counting words, sentences and capitalised tokens the way IFEval does.

- words: maximal runs of `\\w` (Unicode word characters), as NLTK's `RegexpTokenizer(r"\\w+")` finds.
- sentences: NLTK's English Punkt sentence tokenizer (pinned `punkt_tab`, see `nltk_data`).
- word tokens: `nltk.word_tokenize` (Punkt sentences, then NLTK's Treebank-style word splitter),
  used only to count words written in capitals.

Results are memoized by text: the loose evaluation asks the same questions of up to eight variants
of one response, and many of those variants are equal.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ifeval_scorer.nltk_data import ensure_nltk_data

_WORD = re.compile(r"\w+")
_CACHE_SIZE = 4096


def count_words(text: str) -> int:
    """Number of `\\w+` runs in `text` (IFEval's word count for `length_constraints:number_words`)."""
    return sum(1 for _ in _WORD.finditer(text))


@lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    ensure_nltk_data()
    from nltk.tokenize.punkt import PunktTokenizer

    return PunktTokenizer("english")


@lru_cache(maxsize=_CACHE_SIZE)
def count_sentences(text: str) -> int:
    """Number of sentences NLTK's English Punkt model finds in `text`."""
    return len(_sentence_tokenizer().tokenize(text))


@lru_cache(maxsize=_CACHE_SIZE)
def word_tokens(text: str) -> tuple[str, ...]:
    """`nltk.word_tokenize(text)` as a tuple (English Punkt sentences, then Treebank word splitting)."""
    ensure_nltk_data()
    from nltk.tokenize import word_tokenize

    return tuple(word_tokenize(text))


def count_capital_words(text: str) -> int:
    """Number of word tokens for which `str.isupper()` holds (IFEval's "words in all capitals")."""
    return sum(1 for token in word_tokens(text) if token.isupper())


def clear_caches() -> None:
    """Forget memoized sentence counts and word tokens (for cold-start timings)."""
    count_sentences.cache_clear()
    word_tokens.cache_clear()

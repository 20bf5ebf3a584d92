"""The title checker (`detectable_format:title`) finds what Google's `<<[^\\n]+>>` finds, in linear
time (issue 26, finding 8: 80 KB of `<` took 23 s through the regex)."""

from __future__ import annotations

import random
import re
import time

import pytest

from ifeval_scorer.instructions.formats import Title, title_spans

UPSTREAM = re.compile(r"<<[^\n]+>>")  # instruction_following_eval's pattern, the reference


def test_spans_are_upstream_findall_on_random_text() -> None:
    rng = random.Random(26)
    for _ in range(20_000):
        text = "".join(rng.choice("<<>>a \n\r\t") for _ in range(rng.randint(0, 16)))
        assert title_spans(text) == UPSTREAM.findall(text), repr(text)


@pytest.mark.parametrize(
    "text",
    ["<<a>>", "<<>>", "<<<>>>", "<< >>", "x <<a>> y <<b>>", "<<a\n>>", "<<a>\n>", "<<a>>>", "<<<a>>",
     "<<\r>>", "a<<<<b>>>>c", "<<a>> <<>>\n<< >>", "", "\n\n<<t>>\n"],
)
def test_spans_and_verdicts_match_upstream_on_edge_cases(text: str) -> None:
    assert title_spans(text) == UPSTREAM.findall(text)
    upstream_verdict = any(span.lstrip("<").rstrip(">").strip() for span in UPSTREAM.findall(text))
    assert Title().check(text) is upstream_verdict


@pytest.mark.parametrize("text", ["<" * 80_000, "<<" + "x" * 80_000, ("<<" + ">" * 3) * 20_000])
def test_long_adversarial_text_is_checked_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    Title().check(text)
    assert time.perf_counter() - started < 0.5

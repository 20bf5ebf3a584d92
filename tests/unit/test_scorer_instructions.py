"""Edge cases per instruction: exact thresholds, "less than" vs "at least", blank responses.

Each case states the expected verdict (strict) and is also checked against the reference, so a
case that reads wrong to a human but matches upstream documents upstream's behaviour.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
from reference_ifeval import preserved_global_random, reference_verdicts

from ifeval_scorer import INSTRUCTION_IDS, Prompt, evaluate_prompt, loose_variants
from ifeval_scorer.registry import build_rule
from ifeval_scorer.rule import Context, InstructionError

LT, AL = "less than", "at least"
CAPS = "change_case:capital_word_frequency"
CASES: list[tuple[str, dict[str, Any], str, bool]] = [
    ("punctuation:no_comma", {}, "no commas here", True),
    ("punctuation:no_comma", {}, "one, comma", False),
    ("punctuation:no_comma", {}, "ideographic \u3001 comma is fine", True),
    ("length_constraints:number_words", {"num_words": 3, "relation": LT}, "one two", True),
    ("length_constraints:number_words", {"num_words": 3, "relation": LT}, "one two three", False),
    ("length_constraints:number_words", {"num_words": 3, "relation": AL}, "one two three", True),
    ("length_constraints:number_words", {"num_words": 3, "relation": AL}, "one-two three", True),
    ("length_constraints:number_words", {"num_words": 3, "relation": AL}, "don't stop", True),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": LT}, "One. Two.", False),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": LT}, "Mr. Smith came.", True),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": AL}, "One. Two.", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "***\na\n***\nb\n***", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\n\n***\nb", False),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 1}, "a\n\nb", True),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "Then"}, "First.\n\n\"Then, more.", True),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"}, "First.\n\n\n\nThen more.", False),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "then"}, "A.\n\n\n\nThen.\n\nC.", False),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"}, "First.\n\nThenceforth.", False),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a] and [b]", True),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[a\nb] and [c]", False),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\np. s. bye", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi. PS bye", False),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "x\nP.P.S y", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n* b", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n- b\n**c**", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* a\n* b\n* c", False),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*a* and *b*", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "**bold** once", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "**bold** once", False),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*a **b** c*", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "* * and *a*", False),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\na\nSection 2\nb", True),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2},
     "Section 1\na\nSection 2\nb", False),
    ("detectable_format:json_format", {}, "```json\n{\"a\": 1}\n```", True),
    ("detectable_format:json_format", {}, "Here: {\"a\": 1}", False),
    ("detectable_format:title", {}, "<<My Title>>\ntext", True),
    ("detectable_format:title", {}, "<<  >>", False),
    ("detectable_format:constrained_response", {}, "Well. My answer is maybe.", True),
    ("detectable_format:constrained_response", {}, "My answer is Yes.", False),
    ("combination:two_responses", {}, "one\n******\ntwo", True),
    ("combination:two_responses", {}, "same\n******\nsame", False),
    ("combination:two_responses", {}, "a\n******\n\n******\nb", False),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "  say HI. Hi!", True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "Sure: say hi.", False),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. any other questions?\"", True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Any other questions? Yes", False),
    ("startend:quotation", {}, '  "quoted"  ', True),
    ("startend:quotation", {}, '"', False),
    ("change_case:english_lowercase", {}, "all lowercase english words in this sentence", True),
    ("change_case:english_lowercase", {}, "Not all lowercase", False),
    ("change_case:english_capital", {}, "ALL CAPITAL ENGLISH WORDS IN THIS SENTENCE", True),
    ("change_case:english_capital", {}, "123 456", False),
    (CAPS, {"capital_frequency": 2, "capital_relation": LT}, "ONE two", True),
    (CAPS, {"capital_frequency": 2, "capital_relation": AL}, "ONE TWO", True),
    (CAPS, {"capital_frequency": 2, "capital_relation": LT}, "ONE TWO", False),
    ("keywords:existence", {"keywords": ["alpha", "beta"]}, "ALPHA and Betamax", True),
    ("keywords:existence", {"keywords": ["alpha", "beta"]}, "alpha only", False),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": AL}, "cat concatenate", True),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": LT}, "Cat CAT", False),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "concatenate", True),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "a CAT.", False),
    ("keywords:letter_frequency", {"letter": "q", "let_frequency": 2, "let_relation": AL}, "Qq", True),
    ("keywords:letter_frequency", {"letter": "q", "let_frequency": 2, "let_relation": LT}, "Qq", False),
    ("keywords:letter_frequency", {"letter": "q", "let_frequency": 2, "let_relation": LT}, "q", True),
    ("language:response_language", {"language": "fr"}, "Ceci est une phrase écrite en français.", True),
    ("language:response_language", {"language": "fr"}, "This sentence is written in English.", False),
    ("language:response_language", {"language": "fr"}, "12345 !!!", True),  # undetectable passes
]


def _prompt(instruction_id: str, kwargs: dict[str, Any]) -> Prompt:
    return Prompt(key=1, prompt="Say hi.", instruction_id_list=(instruction_id,), kwargs=(kwargs,))


@pytest.fixture(autouse=True)
def _quiet_reference() -> None:
    logging.getLogger("lm_eval").setLevel(logging.CRITICAL)


@pytest.mark.parametrize(("instruction_id", "kwargs", "response", "expected"), CASES)
def test_edge_case(instruction_id: str, kwargs: dict[str, Any], response: str, expected: bool) -> None:
    prompt = _prompt(instruction_id, kwargs)
    assert evaluate_prompt(prompt, response, 0).strict == (expected,)
    with preserved_global_random():
        assert reference_verdicts(prompt, response, 0)[0] == (expected,)


def test_every_instruction_has_a_case() -> None:
    assert {case[0] for case in CASES} == set(INSTRUCTION_IDS)
    assert len(INSTRUCTION_IDS) == 25


@pytest.mark.parametrize("blank", ["", " ", "\n\t \n"])
@pytest.mark.parametrize("instruction_id", ["length_constraints:number_words", "punctuation:no_comma"])
def test_blank_response_fails_even_less_than(instruction_id: str, blank: str) -> None:
    kwargs = {"num_words": 5, "relation": LT} if instruction_id.startswith("length") else {}
    verdicts = evaluate_prompt(_prompt(instruction_id, kwargs), blank, 0)
    assert verdicts.strict == (False,) and verdicts.loose == (False,)


def test_loose_variants_are_upstreams_eight() -> None:
    variants = loose_variants("*Title*\nbody *x*\nlast")
    assert variants == (
        "*Title*\nbody *x*\nlast", "Title\nbody x\nlast", "body *x*\nlast", "*Title*\nbody *x*",
        "body *x*", "body x\nlast", "Title\nbody x", "body x",
    )


def test_loose_passes_when_a_variant_passes() -> None:
    prompt = _prompt("startend:quotation", {})
    verdicts = evaluate_prompt(prompt, 'Sure, here it is:\n"quoted"', 0)
    assert verdicts.strict == (False,) and verdicts.loose == (True,)


def test_invalid_letter_is_drawn_from_the_seeded_generator() -> None:
    kwargs = {"letter": "#", "let_frequency": 1, "let_relation": AL}
    expected = random.Random(5).choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ").lower()
    ctx = Context(rng=random.Random(5), lang_seed=5)
    rule = build_rule("keywords:letter_frequency", kwargs, ctx)
    assert ctx.drew_letter and rule.letter == expected  # type: ignore[attr-defined]
    forced = Context(rng=random.Random(5), lang_seed=5, letter="Z")
    assert build_rule("keywords:letter_frequency", kwargs, forced).letter == "z"  # type: ignore[attr-defined]


def test_bad_kwargs_are_refused() -> None:
    ctx = Context(rng=random.Random(0), lang_seed=0)
    with pytest.raises(InstructionError, match="relation"):
        build_rule("length_constraints:number_words", {"num_words": 3, "relation": "at most"}, ctx)
    with pytest.raises(InstructionError, match="unexpected"):
        build_rule("punctuation:no_comma", {"extra": 1}, ctx)
    with pytest.raises(InstructionError, match="unknown instruction"):
        build_rule("keywords:key_sentences", {}, ctx)
    # Upstream drops falsy kwargs before building: a zero threshold is drawn at random instead.
    rule = build_rule("detectable_content:number_placeholders", {"num_placeholders": 0}, ctx)
    assert 1 <= rule.num_placeholders <= 4  # type: ignore[attr-defined]

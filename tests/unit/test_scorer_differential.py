"""Differential tests: our verdicts equal the reference's on thousands of mutated real responses.

Responses are Google's GPT-4 answers, mutated in the ways IFEval's rules look at (commas, case,
paragraphs, sentences, `P.S.`, `***`, quotes, JSON, placeholders, highlights, titles, bullets,
sections, other languages, truncation), sometimes scored against another prompt's instructions.
Four tests of 500 examples: 2,000 per run, derandomized so CI is stable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_ifeval import fixture_pairs, preserved_global_random, reference_verdicts

from ifeval_scorer import Prompt, evaluate_prompt, load_prompts

EXAMPLES = 500
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large],
)

FOREIGN = (
    "Ceci est une phrase écrite en français pour tester la détection.",
    "यह हिंदी में लिखा गया एक वाक्य है जो भाषा पहचान की जाँच करता है।",
    "Это предложение написано на русском языке для проверки.",
    "Questa è una frase scritta in italiano per provare il rilevamento.",
    "これは言語検出をテストするための日本語の文です。",
    "Dies ist ein deutscher Satz, um die Spracherkennung zu prüfen.",
    "Esta es una frase en español para probar la detección de idioma.",
    "ఇది తెలుగులో వ్రాసిన వాక్యం.",
    "Bu cümle dil tespiti için Türkçe yazılmıştır.",
)
SNIPPETS = (
    ",", ", ", ".", ". ", "!", "?", "\n", "\n\n", "***", "\n***\n", "******", "\n******\n", "*", "**",
    "P.S. thanks", "\nP.S. thanks", "\nP.P.S also", "p.s. note", "[name]", "[address]", "[ ]",
    "*highlight*", "**bold part**", "* *", "<<A Title>>", "<< >>", "<<title\n>>", "\n* item one",
    "\n- item two", "\n*no space", "SECTION 1", "Section 2\n", "Section", "PARAGRAPH 3", '"', "'",
    "My answer is yes.", "My answer is maybe.", "Is there anything else I can help with?",
    "Any other questions?", "HELLO WORLD", "Mr. Smith went to Washington. He arrived.", "e.g. this",
    "```", "```json\n", "{}", "[1, 2]", "# ! ## !!", "\u3001", "ＡＢＣ", " ", "\t",
)


def _insert(text: str, position: int, snippet: str) -> str:
    position = position % (len(text) + 1)
    return text[:position] + snippet + text[position:]


MUTATIONS: dict[str, Callable[[str, int, str], str]] = {
    "insert": lambda text, n, s: _insert(text, n, s),
    "append": lambda text, n, s: text + s,
    "prepend": lambda text, n, s: s + text,
    "no_commas": lambda text, n, s: text.replace(",", ""),
    "drop_some_commas": lambda text, n, s: text.replace(",", "", n % 4),
    "upper": lambda text, n, s: text.upper(),
    "lower": lambda text, n, s: text.lower(),
    "swapcase_part": lambda text, n, s: text[: n % (len(text) + 1)] + text[n % (len(text) + 1):].swapcase(),
    "join_paragraphs": lambda text, n, s: text.replace("\n\n", " "),
    "split_paragraphs": lambda text, n, s: text.replace(". ", ".\n\n", n % 5 + 1),
    "stars_between_paragraphs": lambda text, n, s: text.replace("\n\n", "\n\n***\n\n"),
    "join_sentences": lambda text, n, s: text.replace(". ", " ", n % 7 + 1),
    "split_sentences": lambda text, n, s: text.replace(" and ", ". And ", n % 5 + 1),
    "quote": lambda text, n, s: f'"{text}"',
    "json_dumps": lambda text, n, s: json.dumps({"answer": text}),
    "json_fence": lambda text, n, s: "```json\n" + json.dumps(text) + "\n```",
    "truncate": lambda text, n, s: text[: n % (len(text) + 1)],
    "drop_first_line": lambda text, n, s: "\n".join(text.split("\n")[1:]),
    "strip_stars": lambda text, n, s: text.replace("*", ""),
    "bullets": lambda text, n, s: text.replace("\n", "\n* ", n % 6 + 1),
    "dashes": lambda text, n, s: text.replace("\n", "\n- ", n % 6 + 1),
    "foreign": lambda text, n, s: FOREIGN[n % len(FOREIGN)] + (" " + text if n % 2 else ""),
    "whitespace_only": lambda text, n, s: " \n\t " if n % 3 == 0 else text,
}


@pytest.fixture(scope="module")
def pairs(prompts_path: Path, gpt4_fixture: Path) -> list[tuple[Prompt, str]]:
    """The 541 (prompt, response) pairs of the GPT-4 fixture."""
    logging.getLogger("lm_eval").setLevel(logging.CRITICAL)
    return fixture_pairs(gpt4_fixture, load_prompts(prompts_path))


def _assert_same(prompt: Prompt, response: str, seed: int) -> None:
    with preserved_global_random():
        strict, loose = reference_verdicts(prompt, response, seed)
    ours = evaluate_prompt(prompt, response, seed)
    assert (ours.strict, ours.loose) == (strict, loose), (prompt.key, prompt.instruction_id_list, response)


mutation_steps = st.lists(
    st.tuples(st.sampled_from(sorted(MUTATIONS)), st.integers(0, 10_000), st.sampled_from(SNIPPETS)),
    min_size=1, max_size=4,
)


def _mutate(response: str, steps: list[tuple[str, int, str]]) -> str:
    for name, number, snippet in steps:
        response = MUTATIONS[name](response, number, snippet)
    return response


@SETTINGS
@given(index=st.integers(0, 540), steps=mutation_steps, seed=st.integers(0, 9))
def test_mutated_responses_own_prompt(pairs: list[tuple[Prompt, str]], index: int,
                                      steps: list[tuple[str, int, str]], seed: int) -> None:
    prompt, response = pairs[index]
    _assert_same(prompt, _mutate(response, steps), seed)


@SETTINGS
@given(index=st.integers(0, 540), other=st.integers(0, 540), steps=mutation_steps)
def test_mutated_responses_other_prompt(pairs: list[tuple[Prompt, str]], index: int, other: int,
                                        steps: list[tuple[str, int, str]]) -> None:
    prompt, _ = pairs[index]
    _assert_same(prompt, _mutate(pairs[other][1], steps), 0)


@SETTINGS
@given(index=st.integers(0, 540), pieces=st.lists(st.sampled_from(SNIPPETS + FOREIGN), max_size=12),
       words=st.text(alphabet="abcXYZ ,.\n*\"-[]<>#!é", max_size=60))
def test_snippet_responses(pairs: list[tuple[Prompt, str]], index: int, pieces: list[str],
                           words: str) -> None:
    prompt, _ = pairs[index]
    _assert_same(prompt, words + " ".join(pieces), 0)


@SETTINGS
@given(index=st.integers(0, 540), text=st.text(max_size=200), seed=st.integers(0, 3))
def test_arbitrary_unicode_responses(pairs: list[tuple[Prompt, str]], index: int, text: str,
                                     seed: int) -> None:
    prompt, _ = pairs[index]
    _assert_same(prompt, text, seed)

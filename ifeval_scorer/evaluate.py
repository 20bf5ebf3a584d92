"""Strict and loose evaluation of one response, and the seeding protocol that makes it deterministic.

Strict: each instruction is checked on the response as given. Loose: an instruction passes when any
of eight variants passes (the response; without its first line, last line, or both; each of those
four with every `*` removed). A blank (variant of a) response never passes anything.

Seeding protocol (`seed` an int): for each prompt, rules are built with `random.Random(seed)` in
instruction order and langdetect runs with seed `seed`. This equals, in upstream's code, calling
`random.seed(seed)` and setting `langdetect.DetectorFactory.seed = seed` immediately before each
prompt's strict pass and again before its loose pass: both passes then draw the same letter.
With `seed=None` each pass draws from fresh OS entropy and nothing is memoized, which reproduces
upstream's unseeded behaviour call for call.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ifeval_scorer.prompts import Prompt
from ifeval_scorer.registry import build_rule
from ifeval_scorer.rule import Context, Rule


@dataclass(frozen=True)
class PromptVerdicts:
    """Per-instruction strict and loose verdicts for one prompt's response."""

    key: int
    instruction_id_list: tuple[str, ...]
    strict: tuple[bool, ...]
    loose: tuple[bool, ...]
    random_letter: bool = False  # a letter_frequency letter was drawn at random for this prompt


def loose_variants(response: str) -> tuple[str, ...]:
    """Upstream's eight loose variants, in its order (the first is the response itself)."""
    lines = response.split("\n")
    drop_first = "\n".join(lines[1:]).strip()
    drop_last = "\n".join(lines[:-1]).strip()
    drop_both = "\n".join(lines[1:-1]).strip()
    return (
        response,
        response.replace("*", ""),
        drop_first,
        drop_last,
        drop_both,
        drop_first.replace("*", ""),
        drop_last.replace("*", ""),
        drop_both.replace("*", ""),
    )


def build_rules(prompt: Prompt, ctx: Context) -> list[Rule]:
    """Build the prompt's rules in instruction order (the order random draws happen upstream)."""
    return [
        build_rule(instruction_id, kwargs, ctx)
        for instruction_id, kwargs in zip(prompt.instruction_id_list, prompt.kwargs, strict=True)
    ]


def _passes(rule: Rule, text: str) -> bool:
    return bool(text.strip()) and rule.check(text)


def strict_verdicts(rules: Sequence[Rule], response: str) -> tuple[bool, ...]:
    """Each rule checked on the response as given."""
    return tuple(_passes(rule, response) for rule in rules)


def loose_verdicts(rules: Sequence[Rule], response: str) -> tuple[bool, ...]:
    """Each rule checked on the eight variants in order, stopping at the first pass (as upstream)."""
    variants = loose_variants(response)
    return tuple(any(_passes(rule, text) for text in variants) for rule in rules)


def _context(prompt: Prompt, seed: int | None, letter: str | None) -> Context:
    rng = random.Random(seed) if seed is not None else random.Random()
    return Context(rng=rng, lang_seed=seed, prompt=prompt.prompt, letter=letter)


def evaluate_prompt(
    prompt: Prompt, response: str, seed: int | None = 0, letter: str | None = None
) -> PromptVerdicts:
    """Strict and loose verdicts for one response under the seeding protocol above.

    `letter` forces the letter a `keywords:letter_frequency` rule with an invalid letter would draw.
    Seeded checks are pure, so the loose pass reuses the strict verdict for the unchanged response
    and skips variants equal to one already tried.
    """
    ctx = _context(prompt, seed, letter)
    rules = build_rules(prompt, ctx)
    strict = strict_verdicts(rules, response)
    if seed is None:
        loose_ctx = _context(prompt, None, letter)
        loose = loose_verdicts(build_rules(prompt, loose_ctx), response)
    else:
        others = tuple(dict.fromkeys(text for text in loose_variants(response)[1:] if text != response))
        loose = tuple(
            passed or any(_passes(rule, text) for text in others)
            for rule, passed in zip(rules, strict, strict=True)
        )
    return PromptVerdicts(
        key=prompt.key,
        instruction_id_list=prompt.instruction_id_list,
        strict=strict,
        loose=loose,
        random_letter=ctx.drew_letter,
    )


def clear_caches() -> None:
    """Empty the memo caches (seeded language detection, sentence and word tokens).

    Scoring never needs this; benchmarks call it so every timed run starts cold.
    """
    from ifeval_scorer import detect, text

    detect.clear_cache()
    text.clear_caches()

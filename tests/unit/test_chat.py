"""Chat rendering (real tokenizer of the embedded model), thinking checks, answer extraction."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from capsule.errors import BadInputError
from capsule.generation.chat import HFChatTokenizer, extract_answer, stop_token_ids


@pytest.mark.parametrize(
    ("raw", "thinking", "unclosed", "expected"),
    [
        ("<think>plan</think>\n\nAnswer", "on", "empty", ("Answer", True)),
        ("a</think>b</think>c", "on", "empty", ("b</think>c", True)),  # the first </think> ends thinking
        ("<think>never closes", "on", "empty", ("", False)),
        ("<think>never closes", "on", "raw", ("<think>never closes", False)),
        ("plain answer", "off", "empty", ("plain answer", None)),
        ("x</think>y", "off", "empty", ("y", True)),
    ],
)
def test_extract_answer(raw: str, thinking: str, unclosed: str, expected: tuple[str, bool | None]) -> None:
    assert extract_answer(raw, thinking, unclosed) == expected


def test_extract_answer_rejects_unknown_policy() -> None:
    with pytest.raises(BadInputError, match="unclosed"):
        extract_answer("x", "on", "drop")


def test_stop_ids_come_from_generation_config(embedded_model_dir: Path) -> None:
    assert stop_token_ids(embedded_model_dir) == [2]


def test_render_once_is_deterministic_and_ends_with_assistant_header(embedded_model_dir: Path) -> None:
    tok = HFChatTokenizer(embedded_model_dir)
    ids = tok.render("Write a haiku.", "off")
    assert ids == tok.render("Write a haiku.", "off")
    assert tok.tokenizer.decode(ids).endswith("<|im_start|>assistant\n")
    assert tok.decode(ids[-3:] + [2]) == tok.tokenizer.decode(ids[-3:])  # the stop token is skipped


def test_thinking_on_with_a_template_that_ignores_it_is_an_error(embedded_model_dir: Path) -> None:
    tok = HFChatTokenizer(embedded_model_dir)
    assert not tok.supports_thinking
    with pytest.raises(BadInputError, match="ignores enable_thinking"):
        tok.render("hi", "on")


def test_thinking_is_passed_to_templates_that_use_it(embedded_model_dir: Path, tmp_path: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(embedded_model_dir / name, tmp_path / name)
    (tmp_path / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "<|im_start|>assistant\n{% if not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"
    )
    tok = HFChatTokenizer(tmp_path)
    assert tok.supports_thinking
    on, off = tok.render("hi", "on"), tok.render("hi", "off")
    assert len(off) > len(on) and off[: len(on)] == on
    assert (
        tok.describe()["chat_template_sha256"]
        != HFChatTokenizer(embedded_model_dir).describe()["chat_template_sha256"]
    )

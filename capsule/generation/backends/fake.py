"""A deterministic, dependency-free backend (and matching tokenizer) for unit tests and `--dry-run`.

Each output token is a hash of (input ids, step, and for sampling the request seed), so results are
reproducible, independent of batch neighbours, and different across prompts and seeds. Its options
(`scope`, `stop_rate`) are declared in `capsule.prereg.backend_specs.SPECS["fake"]`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from capsule.errors import BadInputError
from capsule.generation.backends import BackendContext, Completion, DoneCallback, Request, arm_options
from capsule.prereg.backend_specs import FakeOptions
from capsule.prereg.backend_types import Scope
from capsule.prereg.engine_sharing import reuse_key

if TYPE_CHECKING:
    from capsule.prereg.plan import Arm, Decoding

FAKE_STOP_ID = 0
DRY_RUN_MODEL = Path("dry-run-no-model")  # a dry run's model directory: the fake never reads it
_ALPHABET = "abcdefghijklmnopqrstuvwxyz     .\n"  # ids 1..len: generated text is word-like
_BYTE_OFFSET = 256  # rendered prompt bytes use ids >= 256


class FakeChatTokenizer:
    """A byte-level stand-in for a chat template: `<user>text</user><assistant>` as byte ids.

    By default it ignores `enable_thinking`, like the embedded model's template, so asking it for
    thinking is an error; `supports_thinking=True` (dry runs of thinking plans) renders a marker.
    """

    def __init__(self, supports_thinking: bool = False) -> None:
        self.supports_thinking = supports_thinking

    def render(self, text: str, thinking: str) -> list[int]:
        """Prompt bytes, offset so they never collide with generated ids."""
        if thinking == "on" and not self.supports_thinking:
            raise BadInputError("thinking = 'on' but the fake chat template ignores enable_thinking")
        marker = "<think>" if thinking == "on" else ""
        data = f"<user>{text}</user><assistant>{marker}".encode()
        return [_BYTE_OFFSET + b for b in data]

    def decode(self, token_ids: list[int]) -> str:
        """Generated ids back to text (the stop id is skipped, like a special token)."""
        chars = []
        for i in token_ids:
            if 1 <= i <= len(_ALPHABET):
                chars.append(_ALPHABET[i - 1])
            elif i >= _BYTE_OFFSET:
                chars.append(chr(i - _BYTE_OFFSET))
        return "".join(chars)

    def describe(self) -> dict[str, Any]:
        """Identifies the fake rendering."""
        return {
            "kind": "fake",
            "template": "<user>{text}</user><assistant>",
            "supports_thinking": self.supports_thinking,
        }


class FakeBackend:
    """Deterministic generation without any model; never touches the model directory's weights."""

    name = "fake"

    def __init__(
        self, model_dir: Path, arm: Arm, loader: str | None = None, context: BackendContext | None = None
    ) -> None:
        self.loaded_for = reuse_key(arm)
        options = arm_options(self.name, arm, FakeOptions)
        self.scope: Scope = options.scope
        self.stop_rate = options.stop_rate
        if options.refuse is not None:  # an engine refusing the arm's settings at start-up
            raise RuntimeError(f"fake engine refuses: {options.refuse}")
        if options.crash is not None:  # an engine failing at start-up for another reason
            raise RuntimeError(f"fake engine crashed: {options.crash}")
        self.model_dir = model_dir
        self.loader = loader  # recorded only: no weights are loaded
        self.calls = 0

    def _token(self, input_ids: tuple[int, ...], step: int, seed: int | None) -> int:
        digest = hashlib.sha256(repr((input_ids, step, seed)).encode()).digest()
        if int.from_bytes(digest[:4], "big") / 2**32 < self.stop_rate:
            return FAKE_STOP_ID
        return 1 + digest[4] % len(_ALPHABET)

    def generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        max_new_tokens: int,
        seeds: list[int],
        on_done: DoneCallback | None = None,
    ) -> list[Completion]:
        """Complete each request independently; greedy ignores the seed."""
        self.calls += 1
        completions = []
        for i, (request, seed) in enumerate(zip(requests, seeds, strict=True)):
            ids: list[int] = []
            reason: Literal["stop", "length"] = "length"
            for step in range(max_new_tokens):
                token = self._token(request.input_ids, step, seed if decoding.mode == "sample" else None)
                ids.append(token)
                if token == FAKE_STOP_ID:
                    reason = "stop"
                    break
            completion = Completion(token_ids=tuple(ids), finish_reason=reason)
            completions.append(completion)
            if on_done is not None:
                on_done(i, completion)
        return completions

    def describe(self) -> dict[str, Any]:
        """The fake's settings."""
        return {"backend": "fake", "scope": self.scope, "stop_rate": self.stop_rate, "loader": self.loader}

    def close(self) -> None:
        """Nothing to free."""


def dry_run_arm(arm: Arm) -> Arm:
    """`arm` as a dry run runs it (`reproduce --dry-run`, `generate --dry-run`): on the fake backend,
    without the real backend's options or numerics env, every other setting unchanged."""
    from dataclasses import replace

    return replace(arm, backend="fake", backend_options={}, env={})

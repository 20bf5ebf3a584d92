"""Chat templates rendered once into token ids, thinking on/off, and answer extraction.

The capsule (not the backend) renders each prompt through the model's own chat template into token
ids, and every backend receives those ids: the sha256 of the ids is recorded per row, so identical
inputs across backends are provable. Output ids are decoded here too, by the same tokenizer, so
`raw` text never depends on a backend's detokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from capsule.errors import BadInputError, UnavailableError
from capsule.hashing import sha256_bytes
from capsule.jsonio import read_json_object

THINK_CLOSE = "</think>"


class ChatTokenizer(Protocol):
    """Renders a user prompt to input ids and decodes output ids; the arm runner needs no more."""
    def render(self, text: str, thinking: str) -> list[int]:
        """Token ids of one user turn plus the assistant header, through the chat template."""
        ...

    def decode(self, token_ids: list[int]) -> str:
        """Text of generated ids, special tokens (the stop token) skipped."""
        ...

    def describe(self) -> dict[str, Any]:
        """What determines the rendering (template sha256, tokenizer class, thinking support)."""
        ...


def stop_token_ids(model_dir: Path) -> list[int]:
    """The ids that end a generation, read from `generation_config.json` (else `config.json`).

    Both backends take their stop ids from here, so they stop on the same tokens.
    """
    for name in ("generation_config.json", "config.json"):
        path = model_dir / name
        if path.exists():
            value = read_json_object(path, "model config").get("eos_token_id")
            if value is not None:
                return [int(v) for v in (value if isinstance(value, list) else [value])]
    raise BadInputError(f"{model_dir}: no eos_token_id in generation_config.json or config.json")


class HFChatTokenizer:
    """The model directory's own tokenizer and chat template (transformers' AutoTokenizer)."""
    def __init__(self, model_dir: Path) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError as error:
            raise UnavailableError(f"rendering chat templates needs transformers: {error}") from error
        self.model_dir = model_dir
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        except ImportError as error:  # a tokenizer class whose package is not installed (sentencepiece)
            missing = error.name or str(error).split("\n")[0]
            raise UnavailableError(
                f"{model_dir}: its tokenizer needs a package not installed here ({missing}); "
                "install it in the capsule's environment, or use a model with a tokenizer.json"
            ) from None
        template = self.tokenizer.chat_template
        if not isinstance(template, str) or not template:
            raise BadInputError(f"{model_dir}: the tokenizer has no chat template (chat_template.jinja)")
        self.template = template
        # A template "uses" thinking only if it reads the variable; otherwise asking for it is an error.
        self.supports_thinking = "enable_thinking" in template

    def render(self, text: str, thinking: str) -> list[int]:
        """Render one user message with the generation prompt; `thinking` is "on" or "off"."""
        if thinking not in ("on", "off"):
            raise BadInputError(f"thinking must be 'on' or 'off', not {thinking!r}")
        if thinking == "on" and not self.supports_thinking:
            raise BadInputError(
                f"thinking = 'on' but the chat template in {self.model_dir} ignores enable_thinking; "
                "set thinking = 'off' for this model"
            )
        extra: dict[str, Any] = {"enable_thinking": thinking == "on"} if self.supports_thinking else {}
        ids: Any = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=True, add_generation_prompt=True, **extra
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def decode(self, token_ids: list[int]) -> str:
        """Decode with special tokens skipped (the stop token is not part of the text)."""
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def describe(self) -> dict[str, Any]:
        """Template digest and tokenizer identity: what makes two renderings comparable."""
        return {
            "kind": "hf",
            "class": type(self.tokenizer).__name__,
            "chat_template_sha256": sha256_bytes(self.template.encode("utf-8")),
            "supports_thinking": self.supports_thinking,
            "decode": "skip_special_tokens=True",
        }


def load_chat_tokenizer(model_dir: Path) -> ChatTokenizer:
    """The chat tokenizer of a model directory."""
    return HFChatTokenizer(model_dir)


def extract_answer(raw: str, thinking: str, unclosed: str) -> tuple[str, bool | None]:
    """The text to score and whether a thinking block closed (None: thinking off and no block).

    The answer is the text after the first `</think>` (leading newlines removed, as chat templates
    do) whenever one is present. With thinking on and no `</think>`, the arm's `unclosed` policy
    decides: "empty" scores an empty answer, "raw" scores the whole output. Raw output is always
    stored separately, so either policy can be re-scored later.
    """
    if unclosed not in ("empty", "raw"):
        raise BadInputError(f"unclosed must be 'empty' or 'raw', not {unclosed!r}")
    head, found, tail = raw.partition(THINK_CLOSE)
    if found:
        return tail.lstrip("\n"), True
    if thinking == "on":
        return ("" if unclosed == "empty" else raw), False
    return raw, None

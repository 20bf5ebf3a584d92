"""The request bodies sent to an OpenAI-compatible endpoint, every sampling knob explicit.

Two request shapes. The default sends the capsule's own token ids to `/v1/completions` (vLLM takes a
prompt given as a list of ids), so the server computes on exactly the ids every other backend gets.
The chat shape sends the prompt text to `/v1/chat/completions` and lets the server render the chat
template, as the authors of Agents-A1 did; the ids the server rendered come back with
`return_token_ids` (vLLM) and are compared with the capsule's own rendering
(`capsule.generation.backends.server_protocol` reads the streamed reply).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capsule.prereg.plan import Decoding

#: The path of each API under the endpoint's /v1 base.
API_PATHS = {"completions": "/completions", "chat": "/chat/completions"}


def sampling_fields(decoding: Decoding, max_tokens: int, seed: int) -> dict[str, Any]:
    """The sampling part of a request body: every knob explicit, so no server-side default applies
    (vLLM otherwise fills missing fields from the model's generation_config.json)."""
    if decoding.mode == "greedy":
        knobs: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0}
        penalties = {"presence_penalty": 0.0, "repetition_penalty": 1.0}
    else:
        knobs = {
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
            "top_k": decoding.top_k if decoding.top_k > 0 else -1,
            "min_p": decoding.min_p,
        }
        penalties = {
            "presence_penalty": decoding.presence_penalty,
            "repetition_penalty": decoding.repetition_penalty,
        }
    return {
        **knobs,
        **penalties,
        "frequency_penalty": 0.0,
        "max_tokens": max_tokens,
        "seed": int(seed),
        "n": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }


def completion_body(
    model: str, input_ids: tuple[int, ...], sampling: dict[str, Any], stop_ids: list[int]
) -> dict[str, Any]:
    """A /v1/completions body with the prompt as token ids, stopping on the model's own stop ids."""
    return {"model": model, "prompt": list(input_ids), "stop_token_ids": list(stop_ids), **sampling}


def chat_body(model: str, text: str, sampling: dict[str, Any], thinking: bool | None) -> dict[str, Any]:
    """A /v1/chat/completions body with one user turn; `thinking` None leaves the template's default."""
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}], **sampling}
    if thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": thinking}
    return body

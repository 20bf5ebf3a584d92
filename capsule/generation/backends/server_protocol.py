"""The wire protocol of an OpenAI-compatible endpoint: one streamed reply, what a row records of it,
and its failures (the request bodies are `capsule.generation.backends.server_requests`).

Replies are streamed (server-sent events) so the first token's arrival is timed, and always carry
the generated token ids (`return_token_ids`), which the capsule decodes with its own tokenizer. A
reply that fails is a `RequestFailed`, marked retryable (connection lost, timeout, 5xx, a stream cut
short, no choices) or not (wrong key, wrong model id, a refused body); it is never an answer. A
final failure carries its own advice (`RequestFailed.advice`): its class says what went wrong.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from capsule.hashing import sha256_ids

if TYPE_CHECKING:
    import httpx

    from capsule.generation.backends.server_endpoint import Endpoint

class RequestFailed(Exception):
    """One request got no usable reply; `retryable` says whether the same request may be sent again.
    This class is a failure of the request itself (a body the endpoint rejects, a reply that breaks
    the protocol); its subclasses name the other final failures, each with its own advice."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable

    def advice(self, endpoint: Endpoint) -> str:
        """How to fix this failure once it is final, as a clause to append ("" where the message says)."""
        return "; the endpoint does not accept the capsule's request (it needs an OpenAI-compatible vLLM)"

    def at(self, url: str) -> RequestFailed:
        """The same failure (class, retryable) with its message prefixed by the URL it came from."""
        return type(self)(f"{url}: {self}", self.retryable)


class KeyRefused(RequestFailed):
    """The endpoint refused the API key (HTTP 401 / 403)."""

    def advice(self, endpoint: Endpoint) -> str:
        """Where the key is read from."""
        where = f"${endpoint.key_env}" if endpoint.key_env else "the key the server expects"
        return f"; put the endpoint's key in {where}"


class UnknownModel(RequestFailed):
    """The endpoint does not know the model id or the path (HTTP 404)."""

    def advice(self, endpoint: Endpoint) -> str:
        """The model ids the endpoint said it serves."""
        return f"; the endpoint serves {endpoint.reported.get('models')}: set backend_options.model_id"


class NoTokenIds(RequestFailed):
    """The reply carries text without its token ids (an endpoint that ignores return_token_ids)."""

    def advice(self, endpoint: Endpoint) -> str:
        """Nothing: the message says which endpoint is needed."""
        return ""


@dataclass
class Reply:
    """One finished streamed reply: generated ids, why it ended, and when each part arrived (unix s)."""

    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: Any = None
    first_token_at: float | None = None
    usage: dict[str, Any] | None = None
    prompt_token_ids: list[int] | None = None  # as the server rendered / received them, where returned
    model: str | None = None


def _ids(value: Any, field: str) -> list[int]:
    """A list of token ids (JSON integers, not booleans, not negative), else a retryable failure."""
    if not isinstance(value, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    ):
        raise RequestFailed(f"malformed event: {field} {str(value)[:60]!r} is not a list of token ids", True)
    return list(value)


def _usage(value: Any) -> dict[str, Any]:
    """The usage object: token counts that are non-negative JSON integers."""
    if not isinstance(value, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0
        for key, n in value.items() if key.endswith("_tokens")
    ):
        raise RequestFailed(f"malformed event: usage {str(value)[:60]!r} is not an object of counts", True)
    return dict(value)


def _chunk(reply: Reply, payload: dict[str, Any]) -> None:
    """Fold one streamed chunk into `reply`, every field's type checked first: a field of the wrong
    type is a retryable `RequestFailed` (a garbled reply), never a TypeError."""
    model = payload.get("model", reply.model)
    if model is not None and not isinstance(model, str):
        raise RequestFailed(f"malformed event: model {str(model)[:60]!r} is not a string", True)
    reply.model = model
    if payload.get("prompt_token_ids") is not None:  # chat: the first chunk carries them
        reply.prompt_token_ids = _ids(payload["prompt_token_ids"], "prompt_token_ids")
    if payload.get("usage"):
        reply.usage = _usage(payload["usage"])
    choices = payload.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        raise RequestFailed(f"malformed event: choices {str(choices)[:60]!r} is not a list of objects", True)
    for choice in choices:
        if choice.get("prompt_token_ids") is not None:  # completions: in the choice
            reply.prompt_token_ids = _ids(choice["prompt_token_ids"], "prompt_token_ids")
        ids = choice.get("token_ids")
        delta = choice.get("delta")
        if delta is not None and not isinstance(delta, dict):
            raise RequestFailed(f"malformed event: delta {str(delta)[:60]!r} is not an object", True)
        if ids:
            ids = _ids(ids, "token_ids")
            if reply.first_token_at is None:
                reply.first_token_at = time.time()
            reply.token_ids.extend(ids)
        elif (choice.get("text") or (delta or {}).get("content")) and ids is None:
            raise NoTokenIds(
                "the reply carries text but no token_ids; the server backend needs an endpoint that "
                "honours return_token_ids (vLLM >= 0.10)",
                retryable=False,
            )
        elif ids is not None and not isinstance(ids, list):
            raise RequestFailed(f"malformed event: token_ids {str(ids)[:60]!r} is not a list", True)
        finish = choice.get("finish_reason")
        if finish is not None:
            if not isinstance(finish, str):
                raise RequestFailed(f"malformed event: finish_reason {str(finish)[:60]!r}", True)
            reply.finish_reason = finish
            reply.stop_reason = choice.get("stop_reason")


def _check_counts(reply: Reply, url: str, max_tokens: int) -> None:
    """The reply's counts must agree with the request and with themselves: never more tokens than
    `max_tokens` (a server that ignores it is refused, not retried), and usage's completion_tokens,
    where given, equal to the ids received."""
    if len(reply.token_ids) > max_tokens:
        raise RequestFailed(
            f"{url}: the reply has {len(reply.token_ids)} tokens against max_tokens {max_tokens}; the "
            "endpoint does not honour max_tokens, so its replies are not the plan's",
            retryable=False,
        )
    completion = (reply.usage or {}).get("completion_tokens")
    if completion is not None and completion != len(reply.token_ids):
        raise RequestFailed(
            f"{url}: usage says {completion} completion tokens, the stream carried "
            f"{len(reply.token_ids)} token ids (tokens were lost or duplicated)",
            retryable=True,
        )


def _status_failure(response: httpx.Response, url: str) -> RequestFailed:
    """A non-200 reply as a RequestFailed: 401/403 (key), 404 (model or path), 400 (body) are final."""
    try:
        detail = response.read().decode("utf-8", "replace")[:300]
    except Exception:  # noqa: BLE001 - the body is only for the message
        detail = ""
    code = response.status_code
    if code in (401, 403):
        return KeyRefused(f"{url} refused the API key (HTTP {code}): {detail}", retryable=False)
    if code == 404:
        return UnknownModel(f"{url}: HTTP 404 (unknown model id or path): {detail}", retryable=False)
    if code in (400, 422):
        return RequestFailed(f"{url} rejected the request (HTTP {code}): {detail}", retryable=False)
    return RequestFailed(f"{url}: HTTP {code}: {detail}", retryable=True)


def stream_reply(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str],
                 timeout_s: float | None = None) -> Reply:
    """POST `body` to `url` and read the whole event stream into a Reply; RequestFailed otherwise.

    A stream must end with `data: [DONE]` after a chunk that gives the finish reason, or it counts as
    truncated; a reply with no choices at all, or that ended for another reason ("abort"), fails too.
    `timeout_s` bounds the whole request, not one read: a server that trickles keep-alive lines is
    cut off when it runs out (a watchdog closes the stream), a retryable failure.
    """
    import httpx

    reply = Reply()
    done = False
    saw_choice = False
    expired = threading.Event()
    timer: threading.Timer | None = None
    try:
        with client.stream("POST", url, json=body, headers=headers) as response:
            if timeout_s is not None:
                def expire() -> None:
                    expired.set()
                    response.close()  # unblocks the read in progress

                timer = threading.Timer(timeout_s, expire)
                timer.daemon = True
                timer.start()
            if response.status_code != 200:
                raise _status_failure(response, url)
            for line in response.iter_lines():
                if expired.is_set():
                    break
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    payload = json.loads(data)
                except (json.JSONDecodeError, RecursionError) as error:
                    raise RequestFailed(f"{url}: malformed event {data[:80]!r} ({error})", True) from error
                if not isinstance(payload, dict):
                    raise RequestFailed(f"{url}: malformed event {data[:80]!r} (not a JSON object)", True)
                if "error" in payload and not payload.get("choices"):
                    raise RequestFailed(f"{url}: the server reported {payload['error']}", retryable=True)
                try:
                    _chunk(reply, payload)
                except RequestFailed as failure:
                    raise failure.at(url) from None
                saw_choice = saw_choice or bool(payload.get("choices"))
    except RequestFailed:
        raise
    except Exception as error:
        if not expired.is_set():  # a stream closed by the watchdog fails however httpx reports it
            if not isinstance(error, (httpx.TransportError, httpx.StreamError)):
                raise
            lost = error or "connection lost"
            raise RequestFailed(f"{url}: {type(error).__name__}: {lost}", True) from error
    finally:
        if timer is not None:
            timer.cancel()
    if expired.is_set():
        raise RequestFailed(f"{url}: no complete reply within request_timeout_s = {timeout_s:g} s", True)
    if not saw_choice:
        raise RequestFailed(f"{url}: the reply held no choices", retryable=True)
    if not done or reply.finish_reason is None:
        raise RequestFailed(f"{url}: the stream ended before the reply finished (truncated)", True)
    if reply.finish_reason not in ("stop", "length"):
        raise RequestFailed(f"{url}: the request ended with finish_reason {reply.finish_reason!r}", True)
    _check_counts(reply, url, int(body["max_tokens"]))
    return reply


def observed_fields(
    reply: Reply, seen: dict[str, Any], seed: int, attempt: int, api: str, input_ids: tuple[int, ...]
) -> dict[str, Any]:
    """A row's `request` field from its reply: timings (unix s), in-flight count (`seen`, from the
    send), seed sent, usage, attempts; for the chat API, whether the server's rendering equals the
    capsule's input ids."""
    observed: dict[str, Any] = {
        **seen,
        "first_token_at": None if reply.first_token_at is None else round(reply.first_token_at, 6),
        "finished_at": round(time.time(), 6),
        "seed_sent": int(seed),
        "finish_reason_reported": reply.finish_reason,
        "stop_reason": reply.stop_reason,
        "usage": reply.usage,
        "attempts": attempt,
        "api": api,
    }
    if api == "chat":
        ids = reply.prompt_token_ids
        observed["server_prompt_ids_sha256"] = None if ids is None else sha256_ids(ids)
        observed["server_prompt_matches"] = None if ids is None else list(ids) == list(input_ids)
    return observed

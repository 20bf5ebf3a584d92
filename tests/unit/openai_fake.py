"""A small in-process OpenAI-compatible server (http.server in a thread) for the server backend's tests.

It serves `/v1/models`, `/version`, `/health`, and streamed `/v1/completions` and
`/v1/chat/completions` the way vLLM does with `return_token_ids` (ids in each chunk, the prompt's ids
in the first, usage last, then `[DONE]`). Output tokens are a hash of (prompt ids, step, seed), in
the fake tokenizer's alphabet, ending on stop id 0, so replies are deterministic per request and
seed. `faults` injects the failures the backend must survive or report.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from capsule.generation.backends.fake import FakeChatTokenizer

MODEL_ID = "fake-model"


@dataclass
class Faults:
    """What the fake server does wrong. Counts are decremented as requests arrive."""

    fail_next: int = 0  # answer this many generation requests with HTTP 503
    fail_always: bool = False  # every generation request: 503
    fail_after: int = -1  # after this many successful generation requests, 503 forever (-1: never)
    truncate_next: int = 0  # cut this many streams short (no finish reason, no [DONE])
    no_choices_next: int = 0  # answer this many with a stream that has no choices
    non_object_next: int = 0  # answer this many with a stream whose first event is JSON but not an object
    ignore_seed: bool = False  # tokens drawn from a counter: two identical requests differ
    no_token_ids: bool = False  # text only, like an endpoint without return_token_ids
    key: str | None = None  # require this bearer key
    tokens: int = 6  # tokens per reply before the stop token (capped by max_tokens)
    delay_s: float = 0.0  # pause before each streamed event (a slow server)
    keepalive_forever: bool = False  # SSE keep-alive comments every 0.2 s, never a reply (a hung engine)
    raw_event: str | None = None  # this text sent as the first event's data (a garbled field) ...
    raw_event_next: int = -1  # ... on this many requests (-1: every request)
    ignore_max_tokens: bool = False  # `tokens` tokens whatever max_tokens says


@dataclass
class FakeOpenAI:
    """The server's state: faults, every generation request body received, counters."""

    faults: Faults = field(default_factory=Faults)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    served: int = 0
    draws: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def token(self, ids: list[int], step: int, seed: int) -> int:
        digest = hashlib.sha256(repr((ids, step, seed)).encode()).digest()
        return 1 + digest[0] % 26

    def reply_ids(self, prompt_ids: list[int], seed: int, max_tokens: int) -> list[int]:
        if self.faults.ignore_seed:
            with self.lock:
                self.draws += 1
                seed = self.draws
        ids = [self.token(prompt_ids, step, seed) for step in range(self.faults.tokens)]
        return ids if self.faults.ignore_max_tokens else (ids + [0])[:max_tokens]


def _handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    tokenizer = FakeChatTokenizer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _json(self, code: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            key = state.faults.key
            if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                self._json(401, {"error": {"message": "invalid api key"}})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/health":
                self._json(200, {})
            elif self.path == "/version":
                self._json(200, {"version": "fake-0.1"})
            elif self.path == "/v1/models":
                if self._authorized():
                    self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
            else:
                self._json(404, {"error": "no such path"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not self._authorized():
                return
            with state.lock:
                state.bodies.append(body)
                faults = state.faults
                fail = faults.fail_always or faults.fail_next > 0 or 0 <= faults.fail_after <= state.served
                faults.fail_next -= 1 if faults.fail_next > 0 else 0
                truncate = faults.truncate_next > 0
                faults.truncate_next -= 1 if truncate else 0
                empty = faults.no_choices_next > 0
                faults.no_choices_next -= 1 if empty else 0
                scalar = faults.non_object_next > 0
                faults.non_object_next -= 1 if scalar else 0
                raw = faults.raw_event if faults.raw_event_next != 0 else None
                faults.raw_event_next -= 1 if faults.raw_event_next > 0 else 0
            if body.get("model") != MODEL_ID:
                self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                return
            if fail:
                self._json(503, {"error": {"message": "overloaded"}})
                return
            if self.path == "/v1/chat/completions":
                prompt_ids = tokenizer.render(body["messages"][-1]["content"], "off")
            else:
                prompt_ids = list(body["prompt"])
            ids = state.reply_ids(prompt_ids, int(body.get("seed", 0)), int(body["max_tokens"]))
            if state.faults.keepalive_forever:
                self._trickle()
                return
            self._stream(body, prompt_ids, ids, truncate, empty, scalar, raw)
            if not (truncate or empty or scalar or raw):
                with state.lock:
                    state.served += 1

        def _trickle(self) -> None:
            """Headers, then a keep-alive comment every 0.2 s until the client hangs up."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                while True:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                return

        def _stream(self, body: dict[str, Any], prompt_ids: list[int], ids: list[int], truncate: bool,
                    empty: bool, scalar: bool = False, raw: str | None = None) -> None:  # fmt: skip
            chat = "messages" in body
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            if scalar:
                self.wfile.write(b"data: 5\n\n")
            if raw is not None:
                self.wfile.write(f"data: {raw}\n\n".encode())
            events: list[dict[str, Any]] = []
            if empty:
                events.append({"model": MODEL_ID, "choices": []})
            else:
                finish = "stop" if ids and ids[-1] == 0 else "length"
                for n, token in enumerate(ids):
                    choice: dict[str, Any] = {"index": 0, "finish_reason": None}
                    if not state.faults.no_token_ids:
                        choice["token_ids"] = [token]
                    text = tokenizer.decode([token])
                    if chat:
                        choice["delta"] = {"content": text}
                    else:
                        choice["text"] = text
                    if n == 0 and not chat:
                        choice["prompt_token_ids"] = prompt_ids
                    event: dict[str, Any] = {"model": MODEL_ID, "choices": [choice]}
                    if n == 0 and chat:
                        event["prompt_token_ids"] = prompt_ids
                    events.append(event)
                if truncate:
                    events = events[: max(1, len(events) // 2)]
                else:
                    events[-1]["choices"][0]["finish_reason"] = finish
                    usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids)}
                    events.append({"model": MODEL_ID, "choices": [], "usage": usage})
            for event in events:
                time.sleep(state.faults.delay_s)
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            if not truncate:
                self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def serve_forever(port: int, faults: Faults) -> None:
    """Serve the fake endpoint on 127.0.0.1:`port` until killed (a stand-in for a launched server);
    it prints the key it was given, as a careless server might (the launcher must redact it)."""
    print(f"api key: {os.environ.get('VLLM_API_KEY')}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), _handler(FakeOpenAI(faults))).serve_forever()


@contextmanager
def fake_openai(faults: Faults | None = None) -> Iterator[FakeOpenAI]:
    """Run a fake endpoint on a free 127.0.0.1 port for the block; `state.url` is its /v1 base."""
    state = FakeOpenAI(faults or Faults())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()

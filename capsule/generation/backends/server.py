"""The `server` backend: an arm's prompts sent to an OpenAI-compatible endpoint by concurrent clients.

Where the endpoint comes from:
- launched (default): a vLLM server started for the arm's settings (dtype, max_num_seqs =
  batch_size, the engine options, env) on 127.0.0.1 (`server_launch`), stopped by `close()`, and on
  SIGTERM/Ctrl-C through the arm runner's handlers; a leftover from a SIGKILLed capsule in the same
  run directory is stopped first;
- given (`--endpoint URL`, key from the environment variable `BackendContext.key_env`, never
  written): the capsule records what the endpoint reports (model ids, version) and marks its
  hardware and batch settings unknown: the arm's batch_size is what the plan declares, not verified.

`concurrency` client threads send the arm's requests in execution order; which requests share the
server's batches is decided by their arrival, which is the protocol under test. Each row records the
request's send, first-token and finish times, how many requests were in flight at send, the seed
sent, the usage counts and attempts (`Completion.request`). A failed request is retried with the same
seed up to `max_attempts` times; then the arm stops with one error naming the endpoint (its finished
batches stay on disk and a rerun resumes). A failure is never an answer.

Before the arm, the first request is sent twice, identically (seed included), with few tokens: an
endpoint whose two replies differ ignores the seed or is not deterministic, and the arm's record
says so (`describe()["determinism_probe"]`, and a warning).
"""

from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capsule.errors import UnavailableError
from capsule.generation.backends import BackendContext, Completion, DoneCallback, Request, arm_options
from capsule.generation.backends.arm_env import engine_arguments, usage_stats_env
from capsule.generation.backends.checkpoint import resolve_loader
from capsule.generation.backends.server_endpoint import Endpoint, connect
from capsule.generation.backends.server_launch import (
    SERVED_MODEL_NAME,
    LaunchedServer,
    launch,
    launch_command,
    stop_leftovers,
    wait_healthy,
)
from capsule.generation.backends.server_protocol import RequestFailed, observed_fields, stream_reply
from capsule.generation.backends.server_requests import API_PATHS, chat_body, completion_body, sampling_fields
from capsule.generation.chat import stop_token_ids
from capsule.prereg.backend_specs import SPECS, ServerOptions
from capsule.prereg.backend_types import Scope
from capsule.prereg.engine_sharing import reuse_key
from capsule.run_dir import RunDir

if TYPE_CHECKING:
    from capsule.prereg.plan import Arm, Decoding

PROBE_TOKENS = 16  # tokens per determinism-probe request
_RETRY_PAUSE_S = (0.5, 2.0, 5.0)  # pause before the 2nd, 3rd, ... attempt


class ServerArmError(UnavailableError):
    """The arm stopped because requests failed; finished batches are kept and a rerun resumes."""


class _Stopped(Exception):
    """A client thread saw the arm stop before sending."""


class ServerBackend:
    """Client threads against one endpoint, launched for the arm or given by the user."""

    name = "server"
    scope: Scope = SPECS["server"].scope

    def __init__(
        self, model_dir: Path, arm: Arm, loader: str | None = None, context: BackendContext | None = None
    ) -> None:
        import httpx

        context = context or BackendContext()
        self.loaded_for = reuse_key(arm)
        self.options = arm_options(self.name, arm, ServerOptions)
        self.loader = resolve_loader(model_dir, loader)
        self.stop_ids = stop_token_ids(model_dir)
        self.dtype, self.batch_size = arm.dtype, arm.batch_size
        # what a launched server runs with beside our environment: usage statistics off unless the arm
        # opts in, then the arm's own env (recorded in the launch record and describe())
        self.launch_env = {**usage_stats_env(self.options), **arm.env}
        self.thinking = arm.thinking
        self.concurrency = self.options.concurrency
        self.api = self.options.api
        self.client = httpx.Client(
            timeout=httpx.Timeout(self.options.request_timeout_s, connect=10.0),
            limits=httpx.Limits(
                max_connections=self.concurrency + 2, max_keepalive_connections=self.concurrency
            ),
        )
        self.server: LaunchedServer | None = None
        self.leftovers: list[int] = []
        self.probe: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._in_flight = 0
        try:
            if context.endpoint:
                model_id = self.options.model_id
                self.endpoint = connect(self.client, context.endpoint, context.key_env, model_id)
            else:
                self.endpoint = self._launch(model_dir, arm, context.run)
        except BaseException:
            self.close()
            raise

    def _launch(self, model_dir: Path, arm: Arm, run: RunDir | None) -> Endpoint:
        """Start a vLLM server for the arm (stopping any a killed capsule left in this run), wait for
        its health endpoint, and connect to it."""
        if run is None:
            import tempfile

            run = RunDir(Path(tempfile.mkdtemp(prefix="capsule-server-")))
        self.leftovers = stop_leftovers(run)
        engine = engine_arguments(self.options)
        self.server = launch(
            run,
            arm.name,
            lambda port: launch_command(model_dir, arm.dtype, arm.batch_size, port, engine),
            self.launch_env,
        )
        started = time.monotonic()
        health_s = wait_healthy(self.server, self.client, self.options.startup_timeout_s)
        model_id = self.options.model_id or SERVED_MODEL_NAME
        endpoint = connect(self.client, self.server.base_url, None, model_id, key=self.server.api_key)
        self.server.record(
            {"status": "running", "health_after_s": round(health_s, 1), "reported": endpoint.reported,
             "startup_s": round(time.monotonic() - started, 1), "env": self.launch_env}
        )  # fmt: skip
        return endpoint

    # ---- one request ------------------------------------------------------------------------------

    def _body(self, request: Request, decoding: Decoding, max_tokens: int, seed: int) -> dict[str, Any]:
        sampling = sampling_fields(decoding, max_tokens, seed)
        if self.api == "chat":
            thinking = (self.thinking == "on") if self.options.chat_thinking else None
            return chat_body(self.endpoint.model_id, request.text, sampling, thinking)
        return completion_body(self.endpoint.model_id, request.input_ids, sampling, self.stop_ids)

    def _send(self, request: Request, body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """One attempt: the reply and what was observed about it (send time, requests in flight)."""
        with self._lock:
            in_flight = self._in_flight
            self._in_flight += 1
        sent_at = time.time()
        try:
            reply = stream_reply(self.client, self.endpoint.base_url + API_PATHS[self.api], body,
                                 self.endpoint.headers, self.options.request_timeout_s)
        finally:
            with self._lock:
                self._in_flight -= 1
        return reply, {"sent_at": round(sent_at, 6), "in_flight_at_send": in_flight}

    def _complete(self, request: Request, decoding: Decoding, max_tokens: int, seed: int,
                  stop: threading.Event) -> Completion:  # fmt: skip
        """Send one request until it succeeds (same seed each attempt) or `max_attempts` fail."""
        body = self._body(request, decoding, max_tokens, seed)
        attempts = self.options.max_attempts
        last: RequestFailed | None = None
        for attempt in range(1, attempts + 1):
            if stop.is_set():
                raise _Stopped
            self._check_alive()
            try:
                reply, seen = self._send(request, body)
            except RequestFailed as failure:
                if not failure.retryable:
                    text = str(failure)
                    where = "" if self.endpoint.base_url in text else f"{self.endpoint.base_url}: "
                    raise ServerArmError(f"{where}{text}{failure.advice(self.endpoint)}") from failure
                last = failure
                self._check_alive()
                time.sleep(_RETRY_PAUSE_S[min(attempt - 1, len(_RETRY_PAUSE_S) - 1)])
                continue
            return Completion(
                tuple(reply.token_ids),
                "length" if reply.finish_reason == "length" else "stop",
                observed_fields(reply, seen, seed, attempt, self.api, request.input_ids),
            )
        raise ServerArmError(
            f"{self.endpoint.base_url}: the request for prompt key {request.key} failed {attempts} times "
            f"(last: {last}); check that the server is up and serving {self.endpoint.model_id!r}, then rerun "
            "the same command: finished batches are kept and the arm resumes"
        )

    def _check_alive(self) -> None:
        if self.server is not None and not self.server.alive():
            raise ServerArmError(
                f"{self.endpoint.base_url}: {self.server.exit_line()}; finished batches are kept: "
                "rerun the same command to resume the arm"
            )

    # ---- the arm ----------------------------------------------------------------------------------

    def _probe(self, request: Request, decoding: Decoding, seed: int, max_new_tokens: int) -> None:
        """Send one request twice, identically; record whether the replies are the same tokens."""
        stop = threading.Event()
        tokens = min(PROBE_TOKENS, max_new_tokens)
        first = self._complete(request, decoding, tokens, seed, stop).token_ids
        second = self._complete(request, decoding, tokens, seed, stop).token_ids
        self.probe = {"key": request.key, "tokens": tokens, "seed": seed, "identical": first == second}
        if first != second:
            warnings.warn(
                f"{self.endpoint.base_url}: two identical seeded requests returned different tokens; the "
                "endpoint ignores the seed or is not deterministic (recorded in the arm's meta)",
                stacklevel=2,
            )

    def generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        max_new_tokens: int,
        seeds: list[int],
        on_done: DoneCallback | None = None,
    ) -> list[Completion]:
        """Send every request through `concurrency` client threads; `on_done(i, completion)` (in this
        thread) as each finishes. The first request that fails for good stops the arm: unsent requests
        are dropped, and the error is raised once the threads in flight have returned."""
        if not requests:
            return []
        if self.probe is None:
            self._probe(requests[0], decoding, seeds[0], max_new_tokens)
        stop = threading.Event()
        results: list[Completion | None] = [None] * len(requests)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="capsule-client")
        futures: dict[Future[Completion], int] = {
            pool.submit(self._complete, r, decoding, max_new_tokens, s, stop): i
            for i, (r, s) in enumerate(zip(requests, seeds, strict=True))
        }
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = futures[future]
                    completion = results[i] = future.result()
                    if on_done is not None:
                        on_done(i, completion)
        finally:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
        return [c for c in results if c is not None]

    def describe(self) -> dict[str, Any]:
        """Where the endpoint came from and what it reported, the client settings, the probe; for a
        launched server its command and files, for a given endpoint what cannot be known."""
        described: dict[str, Any] = {
            "backend": "server",
            "mode": "launched" if self.server is not None else "endpoint",
            "endpoint": self.endpoint.base_url,
            "reported": self.endpoint.reported,
            "api": self.api,
            "client": {k: v for k, v in self.options.client().items() if k != "model_id"},
            "model_id": self.endpoint.model_id,
            "loader": self.loader,
            "stop_token_ids": self.stop_ids,
            "determinism_probe": self.probe,
            "submission": f"{self.concurrency} client threads, requests in execution order, streamed",
        }
        if self.server is not None:
            described["server"] = {
                "launch": self.server.name,
                "command": self.server.command,
                "dtype": self.dtype,
                "max_num_seqs": self.batch_size,
                "engine_options": self.options.engine(),
                "env": self.launch_env,
                "stopped_leftover_pids": self.leftovers,
            }
        else:
            described["server"] = {
                "hardware": "unknown (a given endpoint)",
                "batch_settings": f"unknown: the arm declares max_num_seqs {self.batch_size}, not verifiable",
                "dtype": f"unknown: the arm declares {self.dtype}",
                "key_env": self.endpoint.key_env,
            }
        return described

    def close(self) -> None:
        """Stop a launched server (its whole process group) and close the client; idempotent."""
        server = self.server
        if server is not None and server.facts.get("status") != "stopped":
            server.stop()
            server.record({"status": "stopped", "returncode": server.process.poll()})
        self.client.close()

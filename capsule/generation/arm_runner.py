"""Run one arm: render inputs once, form and order batches, generate, append rows, resume, cap.

Everything is validated (settings, keys, output directory, an existing arm's identity) before a
model loads; the settings by the plan loader's own rules (`capsule.prereg.adhoc.check_arm`), so an
arm built in code meets the same rulebook as a sealed one. Rows are written one whole batch at a
time (`capsule.generation.rows`); a restart skips finished batches and re-runs the others with
identical composition, so a resumed greedy hf arm equals an uninterrupted one row for row (timings
aside). Cost caps (`capsule.generation.dispatch`) stop after the current batch and mark the arm partial.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.prompts import seeded_subsample
from capsule.errors import BadInputError
from capsule.generation.backends import (
    ENDPOINT_KEY_ENV,
    Backend,
    BackendContext,
    check_backend,
    check_reusable,
    load_backend,
)
from capsule.generation.backends.server_endpoint import endpoint_arm
from capsule.generation.batching import execution_order, form_batches
from capsule.generation.chat import ChatTokenizer, load_chat_tokenizer
from capsule.generation.dispatch import WallClock, dispatch, within_max_prompts
from capsule.generation.rows import RowWriter, progress_bar, render_inputs
from capsule.generation.store import ArmStore, arm_identity
from capsule.hashing import sha256_ids
from capsule.prereg.adhoc import check_arm
from capsule.prereg.backend_specs import SERVER_BACKEND
from capsule.prereg.plan import Arm, Subset
from capsule.run_dir import RunDir
from ifeval_scorer import Prompt


@dataclass(frozen=True)
class ArmJob:
    """One arm to generate: what it runs on, where it goes, and what it is recorded under."""

    arm: Arm
    prompts: Mapping[int, Prompt]
    keys: tuple[int, ...]
    model_dir: Path
    run: RunDir
    plan_hash: str  # the sealed plan's sha256 (or an ad-hoc arm table's): part of the arm's identity
    manifest_digest: str  # the machine fingerprint this segment ran on
    progress: bool = True
    loader: str | None = None  # the plan's [model] loader; None: an ad-hoc arm (config.json decides)
    endpoint: str | None = None  # server backend: an endpoint the user gave (else one is launched)
    key_env: str = ENDPOINT_KEY_ENV  # server backend: the variable holding the endpoint's key


@dataclass(frozen=True)
class ArmResult:
    """What one `generate_arm` call left on disk."""

    arm: str
    rows_path: Path
    meta_path: Path
    n_keys: int
    n_rows: int  # rows on disk now (all segments)
    new_rows: int  # rows written by this call
    new_tokens: int
    complete: bool
    partial: bool
    reason: str
    elapsed_s: float  # this call


def subset_keys(subset: Subset, prompts: dict[int, Prompt]) -> list[int]:
    """The keys a plan subset names, in file order ("all", "first" n) or the seeded sample's order."""
    keys = list(prompts)
    if subset.rule == "all":
        return keys
    if subset.rule == "first":
        return keys[: subset.n]
    if subset.rule == "seeded_sample":
        return seeded_subsample(keys, subset.n, subset.seed)
    raise BadInputError(
        f"subset {subset.name!r}: unknown rule {subset.rule!r}; use all | first | seeded_sample"
    )


def generate_arm(
    arm: Arm,
    *,
    prompts: dict[int, Prompt],
    keys: list[int],
    model_dir: Path,
    out_dir: Path,
    plan_hash: str,
    manifest_digest: str,
    backend: Backend | None = None,
    progress: bool = True,
    tokenizer: ChatTokenizer | None = None,
    loader: str | None = None,
    endpoint: str | None = None,
    key_env: str = ENDPOINT_KEY_ENV,
) -> ArmResult:
    """Generate (or resume) one arm into `out_dir/generations/<arm>.jsonl` + `.meta.json`.

    `backend` may be a loaded instance shared with other arms (see `capsule.generation.backends.reuse_key`);
    otherwise one is loaded after all validation, with the plan's [model] `loader` (None: no plan),
    and closed at the end. `tokenizer` defaults to the model directory's chat template. `endpoint`
    and `key_env` reach a server backend loaded here (`BackendContext`).
    """
    job = ArmJob(
        arm, prompts, tuple(keys), model_dir, RunDir(out_dir), plan_hash, manifest_digest, progress, loader,
        endpoint, key_env,
    )
    return run_arm_job(job, backend=backend, tokenizer=tokenizer)


def run_arm_job(
    job: ArmJob, *, backend: Backend | None = None, tokenizer: ChatTokenizer | None = None
) -> ArmResult:
    """`generate_arm` for a prepared job: validate, then generate what the arm's files still lack."""
    check_arm(job.arm)
    if job.endpoint is not None and job.arm.backend == SERVER_BACKEND:
        job = dataclasses.replace(job, arm=endpoint_arm(job.arm))  # recorded as it applies
    arm = job.arm
    if backend is None:
        check_backend(arm.backend)
    else:
        check_reusable(backend, arm)
    missing = [k for k in job.keys if k not in job.prompts]
    if missing:
        raise BadInputError(f"arm {arm.name!r}: keys not in the prompt set: {missing[:5]}")
    store = ArmStore(job.run, arm.name)
    store.check_writable()
    return _ArmRun(job, store, tokenizer or load_chat_tokenizer(job.model_dir)).run(backend)


def _described(backend: Backend, before: dict[str, Any]) -> dict[str, Any]:
    """The backend's description after generating (what it learned meanwhile, e.g. the server
    backend's determinism probe); the one taken before if it cannot describe itself now."""
    try:
        return backend.describe()
    except Exception:  # noqa: BLE001 - a dead engine may not describe itself; keep what it said before
        return before


class _ArmRun:
    """One call on one arm: its inputs and batches, what is already on disk, and what is left."""

    def __init__(self, job: ArmJob, store: ArmStore, tokenizer: ChatTokenizer) -> None:
        arm = job.arm
        self.job, self.store, self.tokenizer = job, store, tokenizer
        self.inputs = render_inputs(tokenizer, job.prompts, job.keys, arm.thinking)
        self.batches = form_batches(
            list(job.keys), {k: len(v) for k, v in self.inputs.items()}, arm.batch_size, arm.batch_order
        )
        self.identity = arm_identity(
            arm,
            self.batches,
            {k: sha256_ids(v) for k, v in self.inputs.items()},
            {"plan_hash": job.plan_hash, "tokenizer": tokenizer.describe()},
        )
        done = store.open(self.identity, self.batches)
        self.rows_before = sum(len(self.batches[i].keys) for i in done)
        order = execution_order(len(self.batches), arm.seed)
        self.todo = [self.batches[i] for i in order if i not in done]

    def _result(self, n_rows: int, writer: RowWriter | None, reason: str, elapsed_s: float) -> ArmResult:
        complete = n_rows == len(self.job.keys)
        return ArmResult(
            self.job.arm.name,
            self.store.rows_path,
            self.store.meta_path,
            len(self.job.keys),
            n_rows,
            writer.rows if writer else 0,
            writer.tokens if writer else 0,
            complete,
            not complete,
            "" if complete else reason,
            elapsed_s,
        )

    def run(self, backend: Backend | None) -> ArmResult:
        """Generate the batches still missing (within the caps), recording the segment either way."""
        arm, store = self.job.arm, self.store
        if not self.todo and store.persisted and store.meta.get("status") == "complete":
            return self._result(self.rows_before, None, "", 0.0)  # nothing to do: touch nothing
        todo = within_max_prompts(self.todo, arm.max_prompts, self.rows_before)
        store.start(arm, self.identity, self.job.plan_hash, self.job.manifest_digest)
        started = time.monotonic()
        wall = WallClock(arm.max_wall_minutes, float(store.meta.get("elapsed_s", 0.0)), started)
        owned = backend is None
        bar = progress_bar(len(self.job.keys) - self.rows_before, self.job.progress and bool(todo), arm.name)
        writer = RowWriter(arm, self.inputs, self.job.prompts, self.tokenizer, store, bar, started)
        reason = ""
        description: dict[str, Any] = {}
        try:
            with writer.interrupts.installed():
                if todo:
                    context = BackendContext(self.job.run, self.job.endpoint, self.job.key_env)
                    backend = backend or load_backend(
                        arm.backend, self.job.model_dir, arm, self.job.loader, context
                    )
                    description = backend.describe()
                    texts = {k: self.job.prompts[k].prompt for k in self.job.keys}
                    try:
                        reason = dispatch(arm, backend, todo, self.inputs, writer.write, wall, texts)
                    finally:
                        description = _described(backend, description)
        except KeyboardInterrupt as interrupt:
            reason = f"interrupted by {interrupt.args[0] if interrupt.args else 'SIGINT'}"
            raise
        except BaseException as error:
            reason = f"failed: {type(error).__name__}: {error}"
            raise
        finally:
            bar.close()
            n_rows = self.rows_before + writer.rows
            complete = n_rows == len(self.job.keys)
            if not reason and not complete:
                reason = f"max_prompts={arm.max_prompts}" if arm.max_prompts else "stopped"
            store.finish(
                "complete" if complete else "partial",
                "" if complete else reason,
                description,
                time.monotonic() - started,
                {"n_rows": n_rows, "n_keys": len(self.job.keys)},
            )
            if owned and backend is not None:
                backend.close()
        return self._result(n_rows, writer, reason, time.monotonic() - started)

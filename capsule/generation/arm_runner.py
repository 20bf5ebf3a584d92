"""Run one arm: render inputs once, form and order batches, generate, append rows, resume, cap.

Everything is validated (settings, keys, output directory, an existing arm's identity) before a
model loads; the settings by the plan loader's own rules (`capsule.prereg.adhoc.check_arm`), so an
arm built in code meets the same rulebook as a sealed one. Rows are written one whole batch at a
time (`capsule.generation.rows`); a restart skips finished batches and re-runs the others with
identical composition, so a resumed greedy hf arm equals an uninterrupted one row for row (timings
aside). Cost caps (`capsule.generation.dispatch`) stop after the current batch and mark the arm partial.
Given a batch share (`capsule.prereg.engine_sharing.Shard`, a lane's part of an arm cut into
shards), only that share's batches run here; the other shares' lanes append theirs to the same file.
One `ArmRun` holds a call's whole state, built once; its backend comes from a `BackendSlot` (the
one place backends are loaded), asked only when batches remain and before the segment starts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.prompts import seeded_subsample
from capsule.errors import BadInputError
from capsule.generation.arm_identity import arm_identity
from capsule.generation.backends import (
    ENDPOINT_KEY_ENV,
    Backend,
    BackendContext,
    BackendSlot,
    check_backend,
    check_reusable,
)
from capsule.generation.backends.server_endpoint import endpoint_arm
from capsule.generation.batching import Batch, execution_order, form_batches
from capsule.generation.chat import ChatTokenizer, load_chat_tokenizer
from capsule.generation.dispatch import WallClock, dispatch, within_max_prompts
from capsule.generation.rows import Interrupts, RowWriter, progress_bar, render_inputs
from capsule.generation.store import ArmStore, Placement
from capsule.hashing import sha256_ids
from capsule.prereg.adhoc import check_arm
from capsule.prereg.backend_specs import SERVER_BACKEND
from capsule.prereg.plan import Arm, Subset
from capsule.run_dir import RunDir
from ifeval_scorer import Prompt


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
    reason: str  # why the arm stopped short ("" once complete)
    elapsed_s: float  # this call

    @property
    def complete(self) -> bool:
        """Every key of the arm has its row (else the arm is partial, and `reason` says why)."""
        return self.n_rows == self.n_keys


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
    backend: Backend | BackendSlot | None = None,
    progress: bool = True,
    tokenizer: ChatTokenizer | None = None,
    loader: str | None = None,
    endpoint: str | None = None,
    key_env: str = ENDPOINT_KEY_ENV,
    placement: Placement | None = None,
) -> ArmResult:
    """Generate (or resume) one arm into `out_dir/generations/<arm>.jsonl` + `.meta.json`.

    `backend`: a loaded backend to run on (loaded for the arm's load-time settings,
    `capsule.generation.backends.reuse_key`; it stays open), or a `BackendSlot` shared with other
    arms (it loads, or swaps, a backend only when this arm has batches left, and keeps it for the
    next arm); None: a backend is loaded here once all validation has passed, and closed at the end.
    `loader` is the plan's [model] loader (None: no plan). `tokenizer` defaults to the model
    directory's chat template. `endpoint` and `key_env` make the `BackendContext` of a backend
    loaded here (a slot brings its own); against an endpoint a server arm runs, and is recorded,
    with its client options only (`endpoint_arm`). `placement`: the lane this call runs on, and its
    batch share of the arm (only those batches run), recorded in the segment.
    """
    run = RunDir(out_dir)
    shared, given = (backend, None) if isinstance(backend, BackendSlot) else (None, backend)
    slot = shared or BackendSlot(BackendContext(run, endpoint, key_env))
    try:
        arm_run = ArmRun(
            arm, prompts=prompts, keys=tuple(keys), model_dir=model_dir, run=run, plan_hash=plan_hash,
            manifest_digest=manifest_digest, loader=loader, endpoint=slot.context.endpoint,
            tokenizer=tokenizer, backend=given, placement=placement,
        )  # fmt: skip
        return arm_run.run(slot, progress)
    finally:
        if shared is None:  # the slot made here: a backend it loaded dies with this call
            slot.close()


def _described(backend: Backend, before: dict[str, Any]) -> dict[str, Any]:
    """The backend's description after generating (what it learned meanwhile, e.g. the server
    backend's determinism probe); the one taken before if it cannot describe itself now."""
    try:
        return backend.describe()
    except Exception:  # noqa: BLE001 - a dead engine may not describe itself; keep what it said before
        return before


class ArmRun:
    """One call on one arm, built once and validated (settings, keys, output directory, an existing
    arm's identity) before any model loads: its rendered inputs and batches, what is already on
    disk, and what is left."""

    def __init__(
        self,
        arm: Arm,
        *,
        prompts: Mapping[int, Prompt],
        keys: tuple[int, ...],
        model_dir: Path,
        run: RunDir,
        plan_hash: str,  # the sealed plan's sha256 (or an ad-hoc arm table's): part of the arm's identity
        manifest_digest: str,  # the machine fingerprint this segment runs on
        loader: str | None,  # the plan's [model] loader; None: an ad-hoc arm (config.json decides)
        endpoint: str | None,  # a server arm's given endpoint (else a server is launched)
        tokenizer: ChatTokenizer | None,
        backend: Backend | None,  # a loaded backend given by the caller (else the slot loads one)
        placement: Placement | None = None,  # the lane, and its batch share of the arm
    ) -> None:
        check_arm(arm)
        if endpoint is not None and arm.backend == SERVER_BACKEND:
            arm = endpoint_arm(arm)  # recorded as it applies
        if backend is None:
            check_backend(arm.backend)
        else:
            check_reusable(backend, arm)
        missing = [k for k in keys if k not in prompts]
        if missing:
            raise BadInputError(f"arm {arm.name!r}: keys not in the prompt set: {missing[:5]}")
        self.store = ArmStore(run, arm.name)
        self.store.check_writable()
        self.arm, self.prompts, self.keys, self.model_dir, self.loader = arm, prompts, keys, model_dir, loader
        self.plan_hash, self.manifest_digest, self.backend = plan_hash, manifest_digest, backend
        self.placement = placement
        self.tokenizer = tokenizer or load_chat_tokenizer(model_dir)
        self.inputs = render_inputs(self.tokenizer, prompts, keys, arm.thinking)
        self.batches = form_batches(
            list(keys), {k: len(v) for k, v in self.inputs.items()}, arm.batch_size, arm.batch_order
        )
        self.identity = arm_identity(
            arm,
            self.batches,
            {k: sha256_ids(v) for k, v in self.inputs.items()},
            {"plan_hash": plan_hash, "tokenizer": self.tokenizer.describe()},
        )
        done = self.store.open(self.identity, self.batches)
        self.rows_before = sum(len(self.batches[i].keys) for i in done)
        order = execution_order(len(self.batches), arm.seed)
        todo = [(position, self.batches[i]) for position, i in enumerate(order) if i not in done]
        capped = within_max_prompts([batch for _, batch in todo], arm.max_prompts, self.rows_before)
        shard = placement.shard if placement else None  # the cap is the whole arm's, cut by its order
        self.todo = [
            batch for (position, batch), _ in zip(todo, capped, strict=False)  # capped: a prefix of todo
            if shard is None or shard.takes(position)
        ]
        self.all_left = len(todo)  # batches not yet on disk, every share's

    def _result(self, n_rows: int, writer: RowWriter | None, reason: str, elapsed_s: float) -> ArmResult:
        complete = n_rows == len(self.keys)
        return ArmResult(
            self.arm.name,
            self.store.rows_path,
            self.store.meta_path,
            len(self.keys),
            n_rows,
            writer.rows if writer else 0,
            writer.tokens if writer else 0,
            "" if complete else reason,
            elapsed_s,
        )

    def run(self, slot: BackendSlot, progress: bool) -> ArmResult:
        """Generate the batches still missing (within the caps), recording the segment either way.

        The backend (the one given, else `slot`'s for this arm) is asked for only if batches remain,
        and before the segment starts: loading is not generation time (nor the wall-clock cap's), and
        a backend that fails to load leaves the sidecar as it was."""
        arm, store = self.arm, self.store
        if not self.todo and (store.complete or (self.placement and self.placement.shard and self.all_left)):
            return self._result(self.rows_before, None, "", 0.0)  # nothing to do here: touch nothing
        todo = self.todo
        interrupts = Interrupts()
        with interrupts.installed():
            backend = (self.backend or slot.for_arm(arm, self.model_dir, self.loader)) if todo else None
            return self._segment(backend, todo, interrupts, progress)

    def _segment(
        self, backend: Backend | None, todo: list[Batch], interrupts: Interrupts, progress: bool
    ) -> ArmResult:
        """One segment: the batches `todo` on `backend` (None: nothing to generate), then the sidecar
        closed with the segment's status, reason and the backend's description."""
        arm, store = self.arm, self.store
        store.start(arm, self.identity, self.plan_hash, self.manifest_digest, self.placement)
        started = time.monotonic()
        wall = WallClock(arm.max_wall_minutes, store.elapsed_s, started)
        bar = progress_bar(len(self.keys) - self.rows_before, progress and bool(todo), arm.name)
        writer = RowWriter(arm, self.inputs, self.prompts, self.tokenizer, store, bar, started, interrupts)
        reason = ""
        description: dict[str, Any] = {}
        try:
            if backend is not None:
                description = backend.describe()
                texts = {k: self.prompts[k].prompt for k in self.keys}
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
            if not reason and self.placement and self.placement.shard and writer.rows:
                reason = "this lane's batch share is done; the others run on other lanes"
            elif not reason:
                reason = f"max_prompts={arm.max_prompts}" if arm.max_prompts else "stopped"
            n_rows = store.finish(reason, description, time.monotonic() - started, len(self.keys))
            if n_rows is None:  # nothing written: the rows on disk are those found at the start
                n_rows = self.rows_before
        return self._result(n_rows, writer, reason, time.monotonic() - started)

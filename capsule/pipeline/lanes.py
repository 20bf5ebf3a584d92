"""`capsule reproduce --lanes N [--gpus 0,1]`: a plan's arms on N lanes at once, each lane a process.

What a lane is: a list of units (`capsule.prereg.engine_sharing.lane_units`: a vLLM or server
engine run, never split, in plan order; a transformers arm alone, on its own model load; and a
transformers arm longer than a lane's share cut into batch shares, `split_units`, each on its own
model load), placed by the one placement rule `capsule plan cost --lanes` prints
(`capsule.costing.sizing.place_longest_first`, on each unit's estimated minutes on this host's
device; by token budget where the device table has no entry for it). Each lane runs
in its own spawned process on one device: with `--gpus`, lane i sees only GPU `gpus[i % len]`
(`CUDA_VISIBLE_DEVICES`); without, every lane sees what the capsule sees (one GPU shared, or the
CPU). Lanes sharing one GPU need every vLLM (and launched server) arm to fix its
`kv_cache_memory_bytes`, so no arm's KV cache, and with it its batching, depends on its neighbours.

The parent keeps the run directory's lock and everything outside `generations/`; a lane writes
only its own arms' files (the shards of one arm append whole batches to the arm's one rows file,
one writer at a time: `capsule.generation.store`), and each segment of an arm's sidecar records the
lane, device and batch share it ran and the batches it wrote. One lane (`--lanes 1`, the
default) is the sequential generate stage, unchanged.
A lane that fails or dies leaves its rows on disk; the others finish their arms, then the run
stops with one error, and the same command resumes.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capsule.errors import BadInputError, CapsuleError
from capsule.machine.gpu import probe_gpus
from capsule.pipeline.lane_pricing import Weights, placed_units
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.engine_sharing import (
    Shard,
    check_lane_count,
    gather_shares,
)
from capsule.prereg.plan import Plan

CPU_DEVICE = "cpu"
SHARED_GPU = "gpu"  # every GPU this process sees, as it sees them (no CUDA_VISIBLE_DEVICES set)
KV_OPTION = "kv_cache_memory_bytes"
_POLL_S = 0.2


@dataclass(frozen=True)
class LaneOptions:
    """How many lanes, and on which GPUs (NVML indices; empty: as the capsule sees them)."""
    count: int = 1
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Lane:
    """One lane: its number (1-based), the device its process sees, its arms in plan order, and
    the batch share it runs of each arm it runs only part of."""
    number: int
    device: str  # "cpu", "gpu" (shared, as seen) or "cuda:<NVML index>"
    arms: tuple[str, ...]
    shards: tuple[tuple[str, Shard], ...] = ()

    def shard_of(self, arm: str) -> Shard | None:
        """The batch share of `arm` this lane runs (None: all of it)."""
        return dict(self.shards).get(arm)

    def describe(self) -> str:
        """Its arms, a shared arm with its share: "hf-run3b-b8 (batch share 2/3), vllm-run1-b8"."""
        return ", ".join(
            f"{arm} ({shard.label()})" if (shard := self.shard_of(arm)) else arm for arm in self.arms
        )

    @property
    def environment(self) -> dict[str, str]:
        """What the lane's process adds to its environment: the one GPU it may see."""
        if self.device.startswith("cuda:"):
            return {"CUDA_VISIBLE_DEVICES": self.device.removeprefix("cuda:")}
        return {}


def parse_gpus(text: str | None) -> tuple[int, ...]:
    """`--gpus 0,1` as NVML indices (empty when not given); a malformed list is bad input."""
    if text is None:
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts) or len(set(parts)) != len(parts):
        raise BadInputError(
            f"--gpus {text!r}: not a list of distinct GPU indices; "
            "write them as NVML lists them, e.g. --gpus 0,1"
        )
    return tuple(int(part) for part in parts)


def check_lanes(plan: Plan, options: LaneOptions, gpu_count: int | None = None) -> None:
    """Refuse, before anything is generated, a lane count below 1 or above the most units the plan
    can be cut into (`engine_sharing.check_lane_count`), a `--gpus` index this machine does not have
    (or `--gpus` without a GPU), and lanes sharing a GPU whose vLLM arms lack a fixed `kv_cache_memory_bytes`.
    `gpu_count`: NVML's (None: probe)."""
    check_lane_count(plan, options.count)
    if gpu_count is None:
        gpu_count = len(probe_gpus()["gpus"])
    if options.gpus and gpu_count == 0:
        raise BadInputError(
            f"--gpus {_listed(options.gpus)}: this machine has no GPU NVML can list; leave out --gpus"
        )
    absent = [index for index in options.gpus if index >= gpu_count]
    if absent:
        raise BadInputError(
            f"--gpus {_listed(options.gpus)}: no GPU {_listed(tuple(absent))} here (NVML lists {gpu_count}: "
            f"indices 0 to {gpu_count - 1}); name GPUs that exist"
        )
    shared = gpu_count > 0 and options.count > max(1, len(options.gpus))
    unfixed = [
        arm.name for arm in plan.arms
        if SPECS[arm.backend].on_vllm and KV_OPTION not in arm.backend_options
    ]
    if shared and unfixed:
        raise BadInputError(
            f"--lanes {options.count} shares a GPU between lanes, and vLLM/server arm(s) "
            f"{', '.join(unfixed[:4])} have no fixed {KV_OPTION} in the plan, so their KV cache would "
            f"depend on their neighbours: give one GPU per lane (--gpus with {options.count} indices) "
            "or run them with --lanes 1"
        )


def _listed(indices: tuple[int, ...]) -> str:
    return ",".join(str(index) for index in indices)


def assign_lanes(
    plan: Plan, options: LaneOptions, weights: Weights | None = None, gpu_names: list[str] | None = None,
    split: bool = True,
) -> list[Lane]:
    """The lanes (those with arms) for `plan`: units placed longest first on the least loaded lane,
    each lane's arms in plan order, each lane's device and batch shares. `weights` prices the engine
    runs (default: the cost model's minutes, whose starts let `split` cut long transformers arms into
    batch shares: `capsule.pipeline.lane_pricing`; a given pricing splits nothing); `gpu_names`
    (default: NVML's) tell it which device this is."""
    if gpu_names is None:
        gpu_names = [str(g.get("name", "")) for g in probe_gpus()["gpus"]]
    units, placement = placed_units(plan, options.count, weights, gpu_names, split)
    order = [arm.name for arm in plan.arms]
    lanes: list[Lane] = []
    for slot, indices in enumerate(placement):
        if not indices:
            continue
        if options.gpus:
            device = f"cuda:{options.gpus[slot % len(options.gpus)]}"
        else:
            device = SHARED_GPU if gpu_names else CPU_DEVICE
        names = {name for index in indices for name in units[index].names}
        shares = gather_shares([(units[index].names[0], units[index].shard) for index in indices])
        lanes.append(
            Lane(len(lanes) + 1, device, tuple(sorted(names, key=order.index)), tuple(sorted(shares.items())))
        )
    return lanes


class LaneFailedError(CapsuleError):
    """A lane failed or its process died: what the lanes wrote stays, and the same command resumes."""


@dataclass(frozen=True)
class LaneMessage:
    """What a lane's process sends its parent: a line to say, or its end (failed: an error)."""
    lane: int
    line: str | None = None
    done: bool = False
    error: str | None = None
    exit_code: int = 2


def run_lanes(
    lanes: list[Lane], target: Callable[..., None], job: Any, say: Callable[[str], None]
) -> None:
    """Start one spawned process per lane, `target(job, lane, messages)`, relay each lane's lines to
    `say`, and wait for all; then raise LaneFailedError for the first lane that failed or died."""
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    processes = {}
    for lane in lanes:
        say(f"lane {lane.number} on {lane.device}: {lane.describe()}")
        saved = {name: os.environ.get(name) for name in lane.environment}
        os.environ.update(lane.environment)  # a spawned child's environment is the parent's at start
        try:
            process = context.Process(
                target=target, args=(job, lane, messages), name=f"capsule-lane-{lane.number}"
            )
            process.start()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        processes[lane.number] = process
    ended: dict[int, LaneMessage] = {}
    failures: list[str] = []
    exit_code = 2
    try:
        while len(ended) < len(processes) or not _drained(messages):
            try:
                message: LaneMessage = messages.get(timeout=_POLL_S)
            except queue.Empty:
                for number, process in processes.items():
                    if number not in ended and not process.is_alive() and _drained(messages):
                        process.join()
                        ended[number] = LaneMessage(number, done=True, error=_death(process.exitcode))
                        failures.append(f"lane {number}: {ended[number].error}")
                        say(f"lane {number}: {ended[number].error}")
                continue
            if message.line is not None:
                say(f"lane {message.lane}: {message.line}")
            if message.done and message.lane not in ended:
                ended[message.lane] = message
                if message.error is not None:
                    failures.append(f"lane {message.lane}: {message.error}")
                    if len(failures) == 1:
                        exit_code = message.exit_code
                    say(f"lane {message.lane}: stopped: {message.error}")
    finally:
        for process in processes.values():
            process.join()
    if failures:
        more = f" (and {len(failures) - 1} more lane(s) failed)" if len(failures) > 1 else ""
        error = LaneFailedError(
            f"{failures[0]}{more}; every row written so far is kept: run the same command again to resume"
        )
        error.exit_code = exit_code
        raise error


def _drained(messages: Any) -> bool:
    return bool(messages.empty())


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"its process died (signal {-exitcode}) before it finished its arms"
    return f"its process exited with status {exitcode} before it finished its arms"

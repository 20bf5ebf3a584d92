"""`capsule reproduce --lanes N [--gpus 0,1 | --cluster HOST:PORT]`: a plan's arms on N lanes at once.

What a lane is: a list of units (`capsule.prereg.engine_sharing.lane_units`: a vLLM or server
engine run, never split, in plan order; a transformers arm alone, on its own model load; and a
transformers arm longer than a lane's share cut into batch shares, `split_units`, each on its own
model load), placed by the one placement rule `capsule plan cost --lanes` prints
(`capsule.costing.sizing.place_longest_first`, on each unit's estimated minutes on this host's
device; by token budget where the device table has no entry for it). Each lane is one Ray task
(`capsule.cluster`), in a worker process of its own, on one device: on the Ray started here, with
`--gpus` lane i sees only GPU `gpus[i % len]` (`CUDA_VISIBLE_DEVICES`), without, every lane sees what
the capsule sees (one GPU shared, or the CPU); on a cluster, Ray puts each lane on a node with a free
CPU (and GPU, where the cluster has GPUs) and the lane records that node. The lane's numerics
environment is the parent's. Lanes sharing one GPU need every vLLM (and launched server) arm to fix its
`kv_cache_memory_bytes`, so no arm's KV cache, and with it its batching, depends on its neighbours.

The parent keeps the run directory's lock and everything outside `generations/`; a lane writes
only its own arms' files (the shards of one arm append whole batches to the arm's one rows file,
one writer at a time: `capsule.generation.store`), and each segment of an arm's sidecar records the
lane, node, device and batch share it ran and the batches it wrote. Rows reach the run directory
through that store, so on a cluster the results root must be on a filesystem every node mounts at
the same path (docs/cluster.md). One lane (`--lanes 1`, the
default) is the sequential generate stage, unchanged.
A lane that fails or dies leaves its rows on disk; the others finish their arms, then the run
stops with one error, and the same command resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from capsule.cluster.ray_runtime import check_reachable
from capsule.costing.sizing import check_kinds
from capsule.errors import BadInputError
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


@dataclass(frozen=True)
class LaneOptions:
    """How many lanes, and on which GPUs (NVML indices; empty: as the capsule sees them)."""
    count: int = 1
    gpus: tuple[int, ...] = ()
    cluster: str | None = None  # a Ray cluster's address (None: a Ray started on this host)


@dataclass(frozen=True)
class Lane:
    """One lane: its number (1-based), the device its process sees, its arms in plan order, and
    the batch share it runs of each arm it runs only part of."""
    number: int
    device: str  # "cpu", "gpu" (shared, as seen) or "cuda:<NVML index>"
    arms: tuple[str, ...]
    shards: tuple[tuple[str, Shard], ...] = ()
    hardware: str = ""  # the hardware kind (a Ray node resource) its arms ask for ("" any node)
    node: str | None = None  # the Ray node it runs on, once it runs
    manifest_digest: str | None = None  # that node's manifest, on a cluster (None: the run's)

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
    `gpu_count`: NVML's (None: probe). With `--cluster`: `--gpus` (Ray picks each lane's GPU there),
    fewer than two lanes, and an address where nothing answers are refused too."""
    check_lane_count(plan, options.count)
    check_kinds([arm.hardware for arm in plan.arms], options.count)
    if options.cluster is not None:
        if options.gpus:
            raise BadInputError("--cluster: Ray gives each lane its GPU on the cluster; leave out --gpus")
        if options.count < 2:
            raise BadInputError("--cluster runs lanes on a Ray cluster: give --lanes 2 or more")
        check_reachable(options.cluster)
        return
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


def check_hardware(plan: Plan, options: LaneOptions, recorded: bool) -> None:
    """Refuse a recorded run of a plan whose arms ask for a hardware kind without `--cluster`: only
    Ray on a cluster places an arm by hardware, and on this host alone the arm would run on whatever
    this host is, under a name that says otherwise (a dry run, rehearsal or probe runs them here)."""
    asking = [arm.name for arm in plan.arms if arm.hardware]
    if recorded and asking and options.cluster is None:
        raise BadInputError(
            f"arm(s) {', '.join(asking[:4])} ask for a hardware kind, which only lanes on a Ray cluster "
            "place: run with --lanes N --cluster HOST:PORT (docs/cluster.md)"
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
        hardware = next((units[i].arms[0].hardware for i in indices if units[i].arms[0].hardware), "")
        shares = gather_shares([(units[index].names[0], units[index].shard) for index in indices])
        lanes.append(Lane(
            len(lanes) + 1, device, tuple(sorted(names, key=order.index)), tuple(sorted(shares.items())),
            hardware,
        ))
    return lanes

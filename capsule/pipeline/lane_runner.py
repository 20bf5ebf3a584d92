"""Lanes as Ray tasks: each lane of `capsule.pipeline.lanes` run as one task on the Ray of
`capsule.cluster.ray_runtime` (started here, loopback only, or a cluster joined), its lines relayed
to the parent, its end or death turned into one error for the run.

A lane's task takes the parent's working directory and the variables `lane_env` names exactly as the
parent has them (a Ray worker's environment is its raylet's, fixed when that Ray started, and Ray sets
OMP_NUM_THREADS where it is unset), so a lane computes what a spawned child of the parent would. It is
never retried: a lane that dies stops the run, every row written stays, and the same command resumes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capsule.cluster.ray_runtime import cluster_nodes, current_node, lacking, ray_session, remote_task
from capsule.errors import BadInputError, CapsuleError
from capsule.pipeline.lanes import Lane
from capsule.prereg.numerics_env import NUMERICS_ENV

_POLL_S = 0.2


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


HARDWARE_SHARE = 0.01  # of a node's hardware-kind resource, per lane: a node of that kind takes many


def lane_resources(lane: Lane, cluster: str | None, cluster_gpus: float) -> dict[str, float]:
    """What a lane asks Ray for: one CPU (a Ray started here has one per lane, so all run at once);
    on a cluster with GPUs, one GPU too, which Ray then picks and makes the only one the lane sees;
    and a share of its hardware kind's resource, so it runs only on a node of that kind. Here,
    everything runs on this host (whatever kind it is: a dry run, rehearsal or probe), and `--gpus`
    pins each lane's GPU itself (`Lane.environment`), so Ray manages neither."""
    needs = {"CPU": 1.0}
    if cluster is not None and cluster_gpus > 0:
        needs["GPU"] = 1.0
    if cluster is not None and lane.hardware:
        needs[lane.hardware] = HARDWARE_SHARE
    return needs


CAPSULE_ENV_PREFIX = "CAPSULE_"


def lane_env(also: tuple[str, ...] = ()) -> dict[str, str | None]:
    """The variables a lane takes from its parent, as the parent has them (None: unset there): the
    numerics allow-list, every `CAPSULE_*` variable, and `also` (the endpoint key's). A Ray worker's
    environment is its raylet's, fixed when that Ray started; this is what a lane must see as a
    spawned child of the parent would have."""
    names = {*NUMERICS_ENV, *also, *(name for name in os.environ if name.startswith(CAPSULE_ENV_PREFIX))}
    return {name: os.environ.get(name) for name in sorted(names)}


def run_lanes(
    lanes: list[Lane], target: Callable[..., None], job: Any, say: Callable[[str], None],
    cluster: str | None = None, env: dict[str, str | None] | None = None,
    fingerprint: Callable[[Any], dict[str, str]] | None = None,
) -> None:
    """Run `target(job, lane, messages)` for each lane as one Ray task (`capsule.cluster`: a Ray on
    this host, loopback only, or the cluster at `cluster`) with `env` set (default: `lane_env()`),
    relay each lane's lines to `say`, and wait for all; then raise LaneFailedError for the first
    lane that failed or died. A cluster without the resources a lane asks for is refused before any
    lane starts."""
    with ray_session(cluster, cpus=len(lanes)) as ray:
        gpus = float(ray.cluster_resources().get("GPU", 0.0)) if cluster is not None else 0.0
        needs = [lane_resources(lane, cluster, gpus) for lane in lanes]
        missing = sorted({name for need in needs for name in lacking(ray, need)})
        if missing:
            raise BadInputError(
                f"no node of the Ray cluster has {', '.join(missing)} for a lane; start a node with it "
                "(`ray start --address ... --resources`, docs/cluster.md), then run the same command again"
            )
        digests = fingerprint(ray) if fingerprint is not None and cluster is not None else None
        if cluster is not None:
            say(f"lanes on the Ray cluster at {cluster}: {len(cluster_nodes(ray))} node(s)")
        _run_on_ray(ray, lanes, needs, target, job, say, lane_env() if env is None else env, digests)


def _run_on_ray(
    ray: Any, lanes: list[Lane], needs: list[dict[str, float]], target: Callable[..., None], job: Any,
    say: Callable[[str], None], env: dict[str, str | None], digests: dict[str, str] | None,
) -> None:
    from ray.util.queue import Empty, Queue

    messages = Queue(actor_options={"num_cpus": 0})  # so it takes no lane's CPU
    refs = {}
    for lane, need in zip(lanes, needs, strict=True):
        kind = f" [{lane.hardware}]" if lane.hardware else ""
        where = "a node of the cluster" if digests is not None else lane.device
        say(f"lane {lane.number} on {where}{kind}: {lane.describe()}")
        task = remote_task(ray, _lane_entry, f"capsule-lane-{lane.number}", need)
        refs[lane.number] = task.remote(target, job, lane, messages, env, os.getcwd(), digests)
    ended: dict[int, LaneMessage] = {}
    failures: list[str] = []
    exit_code = 2
    try:
        while len(ended) < len(refs):
            try:
                message: LaneMessage = messages.get(timeout=_POLL_S)
            except Empty:
                ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=0)
                for number, ref in refs.items():
                    if number not in ended and ref in ready and messages.empty():
                        ended[number] = LaneMessage(number, done=True, error=_death(ray, ref))
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
        ray.wait(list(refs.values()), num_returns=len(refs))  # every lane's process has ended
    except BaseException:  # interrupted: no lane goes on writing after its parent stopped
        for ref in refs.values():
            ray.cancel(ref, force=True)
        raise
    if failures:
        more = f" (and {len(failures) - 1} more lane(s) failed)" if len(failures) > 1 else ""
        error = LaneFailedError(
            f"{failures[0]}{more}; every row written so far is kept: run the same command again to resume"
        )
        error.exit_code = exit_code
        raise error


def _lane_entry(
    target: Callable[..., None], job: Any, lane: Lane, messages: Any, env: dict[str, str | None], cwd: str,
    digests: dict[str, str] | None,
) -> None:
    """A lane's Ray task: the parent's working directory (the run's paths may be relative to it) and
    `env` exactly (`lane_env`; Ray also sets OMP_NUM_THREADS to a task's CPUs where it is unset,
    which would change how CPU reductions split), the lane's GPU, the node it runs on and that
    node's manifest digest (`digests`, on a cluster); then the lane."""
    import ray

    node = current_node(ray)
    if digests is not None and node not in digests:
        messages.put(LaneMessage(lane.number, done=True, error=(
            f"Ray node {node[:12]} joined after the run fingerprinted its nodes; run the same command again"
        )))
        return

    try:
        os.chdir(cwd)
    except OSError:
        messages.put(LaneMessage(lane.number, done=True, error=(
            f"{cwd} is not on Ray node {node[:12]}: on a cluster every node mounts the results "
            "root at the same path (docs/cluster.md)"
        )))
        return

    for name in [name for name in os.environ if name.startswith(CAPSULE_ENV_PREFIX)]:
        os.environ.pop(name)  # left from whoever started this Ray
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    os.environ.update(lane.environment)
    device = lane.device
    if digests is not None:  # on a cluster: the GPU Ray picked on this node, or its CPU
        gpu_ids = ray.get_gpu_ids()
        device = f"cuda:{gpu_ids[0]}" if gpu_ids else "cpu"
    digest = digests[node] if digests is not None else None
    target(job, dataclasses.replace(lane, device=device, node=node, manifest_digest=digest), messages)


def _death(ray: Any, ref: Any) -> str:
    """Why a lane's task ended without saying it had: its worker process or its node died (Ray's
    name for it), or it could not run."""
    try:
        ray.get(ref)
    except Exception as error:  # noqa: BLE001 - Ray's account of the death, in one line
        kind = type(error).__name__
        if kind in ("WorkerCrashedError", "NodeDiedError", "TaskCancelledError"):
            return f"its process died (Ray: {kind}) before it finished its arms"
        first = (str(error).strip().splitlines() or [""])[0]
        return f"its task failed ({kind}: {first[:200]}) before it finished its arms"
    return "its process ended before it finished its arms"

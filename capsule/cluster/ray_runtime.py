"""The Ray a study's lanes run on: started here (the default), or an existing cluster joined.

Started here, Ray is a head node on this host that listens on loopback only: with
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` Ray takes 127.0.0.1 as its node address
(`ray._private.services.get_node_ip_address`), and its GCS, raylet, object manager, workers and
runtime-env agent then bind 127.0.0.1 instead of every interface (measured with `ss -ltnp`, Ray
2.60.0; without it they bind `*` and the host's external address even when 127.0.0.1 is passed as
the node address). No dashboard, no usage report, no auth token written to `~/.ray`, a small object
store (a lane sends lines and its end, never rows). Its CPUs are the lanes, so every lane runs at once.

Joined (`--cluster HOST:PORT`), Ray is the cluster's: this process connects as a driver; the
address is tried first, so an address where nothing answers is one error line, not a minute of
retries.

A Ray already running in this process (a test's shared cluster) is used as it is and left running.
A process that imported Ray before (vLLM imports it) has the loopback switch turned where Ray keeps
it (`_loopback_switch`), and every Ray started here is checked to have taken the loopback address.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from capsule.errors import BadInputError, CapsuleError, UnavailableError

LOOPBACK = "127.0.0.1"
#: Set before Ray is imported, for a Ray started here: loopback only, nothing reported, nothing in ~/.ray.
LOCAL_ENV: dict[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
}
#: Set before joining a cluster: this driver reports no usage either.
JOIN_ENV: dict[str, str] = {"RAY_USAGE_STATS_ENABLED": "0"}
OBJECT_STORE_BYTES = 128 * 2**20  # Ray's floor is 75 MiB; the lanes' messages are a few KiB
_CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Node:
    """A Ray node: its id, its address, and its resources (CPU, GPU, accelerator and custom ones)."""
    node_id: str
    address: str
    resources: Mapping[str, float]


def parse_address(text: str) -> tuple[str, int]:
    """`--cluster HOST:PORT` (a Ray head's GCS address, as `ray start --head` prints it) as a pair;
    anything else is bad input."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInputError(
            f"--cluster {text!r}: not HOST:PORT; give the address `ray start --head` printed, "
            "e.g. --cluster 10.0.0.5:6379 (docs/cluster.md)"
        )
    return host.strip("[]"), int(port)


def check_reachable(text: str) -> None:
    """Refuse (one line, exit 2) a `--cluster` address that is malformed or where nothing answers."""
    host, port = parse_address(text)
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise UnavailableError(
            f"--cluster {text}: nothing answers there ({error.strerror or error}); start the head with "
            f"`ray start --head --port {port}` on {host}, or leave out --cluster for a Ray on this host "
            "(docs/cluster.md)"
        ) from None


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UnavailableError(
            "lanes run on Ray, which is not installed here: `make setup` installs it (or "
            "`pip install ray==2.60.0`); --lanes 1 needs no Ray"
        ) from None
    return ray


@contextmanager
def ray_session(address: str | None, cpus: int) -> Iterator[Any]:
    """Ray for this process while the block runs: a loopback-only head with `cpus` CPUs started here
    (`address` None), or the cluster at `address` joined; the `ray` module is yielded. Ray already
    initialised in this process is used as it is, and left running."""
    if address is None:
        for name, value in LOCAL_ENV.items():
            os.environ.setdefault(name, value)
    else:
        check_reachable(address)
        for name, value in JOIN_ENV.items():
            os.environ.setdefault(name, value)
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    if address is None:
        _loopback_switch(ray)
    common: dict[str, Any] = {"configure_logging": True, "logging_level": "warning", "log_to_driver": True}
    try:
        if address is None:
            ray.init(
                num_cpus=cpus, num_gpus=0, include_dashboard=False, _node_ip_address=LOOPBACK,
                object_store_memory=OBJECT_STORE_BYTES, **common,
            )
        else:
            ray.init(address=address, **common)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address}" if address else "a Ray on this host"
        raise UnavailableError(f"could not start {where}: {' '.join(str(error).split())[:300]}") from None
    try:
        if address is None:
            _check_loopback(ray)
        yield ray
    finally:
        ray.shutdown()


def _loopback_switch(ray: Any) -> None:
    """Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when it is imported, into
    `ray._private.ray_constants.ENABLE_RAY_CLUSTER`, which `services.get_node_ip_address` reads at
    each call: a process that imported Ray before LOCAL_ENV was set (vLLM imports it) gets the same
    switch turned here. `_check_loopback` still refuses a Ray that listens beyond this host."""
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", False):
        constants.ENABLE_RAY_CLUSTER = False


def _check_loopback(ray: Any) -> None:
    """Refuse a local Ray whose node address is not loopback (a Ray that changed how it picks its
    address, say): its servers would listen beyond this host."""
    addresses = {node.address for node in cluster_nodes(ray)}
    if addresses != {LOOPBACK}:
        raise UnavailableError(
            f"the Ray started here took node address(es) {', '.join(sorted(addresses))}, not {LOOPBACK}, "
            "so it would listen beyond this host; set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before "
            "anything imports ray"
        )


def cluster_nodes(ray: Any) -> list[Node]:
    """The cluster's live nodes."""
    return [
        Node(str(item["NodeID"]), str(item["NodeManagerAddress"]), dict(item.get("Resources", {})))
        for item in ray.nodes() if item.get("Alive")
    ]


def current_node(ray: Any) -> str:
    """The id of the node the calling process runs on (a lane's task, or the driver)."""
    return str(ray.get_runtime_context().get_node_id())


def lacking(ray: Any, needs: Mapping[str, float]) -> list[str]:
    """The resources in `needs` that no live node of the cluster has as much of."""
    nodes = cluster_nodes(ray)
    return [
        name for name, amount in needs.items()
        if not any(node.resources.get(name, 0.0) >= amount for node in nodes)
    ]


def remote_task(ray: Any, function: Callable[..., None], name: str, resources: Mapping[str, float]) -> Any:
    """`function` as a Ray task that is never retried (a lane that dies stops the run, whose rows
    stay and whose rerun resumes) and whose worker exits after it (a lane's model and engine leave
    with its process, as a spawned lane's did)."""
    cpus = float(resources.get("CPU", 0.0))
    gpus = float(resources.get("GPU", 0.0))
    custom = {key: value for key, value in resources.items() if key not in ("CPU", "GPU")}
    return ray.remote(max_calls=1, max_retries=0)(function).options(
        name=name, num_cpus=cpus, num_gpus=gpus, resources=custom or None,
    )


def on_each_node(ray: Any, nodes: list[Node], function: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """`function(*args)` run once on each of `nodes` (a task pinned to the node, taking none of its
    CPUs), its results by node id; a node that dies meanwhile is UnavailableError naming it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(max_retries=0)(function)
    refs = {
        node.node_id: task.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        ).remote(*args)
        for node in nodes
    }
    results: dict[str, Any] = {}
    for node in nodes:
        try:
            results[node.node_id] = ray.get(refs[node.node_id])
        except ray.exceptions.RayTaskError as error:
            if isinstance(error.cause, CapsuleError):  # the function's own one-line error, from that node
                raise error.cause from None
            raise UnavailableError(
                f"Ray node {node.address} ({node.node_id[:12]}): {type(error.cause).__name__}: {error.cause}"
            ) from None
        except ray.exceptions.RayError as error:
            raise UnavailableError(
                f"Ray node {node.address} ({node.node_id[:12]}) died before it was fingerprinted "
                f"({type(error).__name__}); run the same command again"
            ) from None
    return results

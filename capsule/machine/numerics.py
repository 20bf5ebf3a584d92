"""Record the settings that change floating-point results: env vars, thread counts, torch's flags.

torch's TF32, determinism, matmul-precision and attention-backend flags are per-process state. They
are read only from a torch that is already imported (inside a run, after the backend has set them
up) or when the caller asks for torch to be imported; otherwise the manifest says they were not read,
rather than writing down defaults it did not observe. The backend adds what only it knows (dtype,
attention implementation chosen, batch-invariance mode) through `extra`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

# Exact names and prefixes of environment variables that can change numerics.
NUMERICS_ENV_NAMES: frozenset[str] = frozenset(
    {
        "CUBLAS_WORKSPACE_CONFIG",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_TF32_OVERRIDE",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "PYTORCH_CUDA_ALLOC_CONF",
        "ATEN_CPU_CAPABILITY",
        "PYTHONHASHSEED",
    }
)
NUMERICS_ENV_PREFIXES: tuple[str, ...] = (
    "VLLM_",
    "CUBLAS",
    "CUBLASLT_",
    "CUDNN_",
    "NCCL_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "ONEDNN_",
    "DNNL_",
    "MKL_",
    "KMP_",
    "OMP_",
    "GOMP_",
)
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
REDACTED = "<redacted>"
# A value holding an absolute path (a cache folder, say) is recorded as its sha256: a run travels
# to other machines without the sender's file layout, and equal values still compare equal.
_PATH_VALUE = re.compile(r"(^|[:;,=])\s*(/|~|[A-Za-z]:[\\/])")
PATH_DIGEST_PREFIX = "sha256:"


def _recorded(name: str, value: str) -> str:
    if _SECRET.search(name):
        return REDACTED
    if _PATH_VALUE.search(value):
        return PATH_DIGEST_PREFIX + hashlib.sha256(value.encode("utf-8")).hexdigest()
    return value


def numerics_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every set environment variable that can change numerics; values of secret-looking names
    redacted, values holding an absolute path hashed."""
    environ = os.environ if environ is None else environ
    chosen = {
        name: _recorded(name, value)
        for name, value in environ.items()
        if name in NUMERICS_ENV_NAMES or name.startswith(NUMERICS_ENV_PREFIXES)
    }
    return dict(sorted(chosen.items()))


def _read(call: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newer torch warns on the TF32 accessors it is replacing
        try:
            return call()
        except Exception:  # an accessor missing from this torch version: recorded as null
            return None


def torch_runtime(torch: Any) -> dict[str, Any]:
    """torch's per-process numerics flags: TF32, reduced-precision reductions, determinism, SDPA, threads."""
    cuda: Any = getattr(torch.backends, "cuda", None)
    cudnn: Any = getattr(torch.backends, "cudnn", None)
    return {
        "recorded": True,
        "matmul_allow_tf32": _read(lambda: cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": _read(lambda: cudnn.allow_tf32),
        "float32_matmul_precision": _read(lambda: torch.get_float32_matmul_precision()),
        "matmul_fp32_precision": _read(lambda: cuda.matmul.fp32_precision),
        "matmul_allow_bf16_reduced_precision_reduction": _read(
            lambda: cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "matmul_allow_fp16_reduced_precision_reduction": _read(
            lambda: cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "deterministic_algorithms": _read(lambda: torch.are_deterministic_algorithms_enabled()),
        "deterministic_warn_only": _read(lambda: torch.is_deterministic_algorithms_warn_only_enabled()),
        "cudnn_deterministic": _read(lambda: cudnn.deterministic),
        "cudnn_benchmark": _read(lambda: cudnn.benchmark),
        "sdpa_backends_enabled": {
            "flash": _read(lambda: cuda.flash_sdp_enabled()),
            "mem_efficient": _read(lambda: cuda.mem_efficient_sdp_enabled()),
            "math": _read(lambda: cuda.math_sdp_enabled()),
            "cudnn": _read(lambda: cuda.cudnn_sdp_enabled()),
        },
        "cpu_capability": _read(lambda: torch.backends.cpu.get_cpu_capability()),
        "num_threads": _read(lambda: torch.get_num_threads()),
        "num_interop_threads": _read(lambda: torch.get_num_interop_threads()),
        "cuda_available": _read(lambda: torch.cuda.is_available()),
    }


def probe_numerics(*, import_torch: bool = False, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The numerics section: env vars, usable cores, torch's live flags (or why not read), backend extras."""
    torch = sys.modules.get("torch")
    if torch is None and import_torch:
        import torch  # noqa: PLC0415 - deliberately lazy: 2 to 4 s, only on request
    if torch is not None:
        runtime = torch_runtime(torch)
    else:
        runtime = {
            "recorded": False,
            "reason": "torch not imported in this process; its flags were not read (process defaults)",
        }
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return {
        "env": numerics_env(),
        "threads": {"usable_cores": usable, "torch": runtime.get("num_threads")},
        "torch": runtime,
        # JSON round trip: a backend may pass torch.dtype or Path values; they are recorded as text.
        "extra": json.loads(json.dumps(dict(extra or {}), default=str, sort_keys=True)),
    }

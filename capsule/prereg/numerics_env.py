"""The environment variables an arm's `env` may set: the allow-list, each with why, written once.

An arm's `env` is set in the process while its backend is loaded (`capsule.generation.backends.arm_env`),
so it is a way into the process: `LD_PRELOAD`, `PATH` or `PYTHONPATH` would run other code than the
capsule's. The plan loader therefore accepts only variables that select kernels, thread counts or
determinism modes (the numerics a plan seals), with printable ASCII values, and refuses any other
name at seal time and at load time. prereg/README.md lists them; adding one is one row here.
"""

from __future__ import annotations

import re

#: Every variable an arm may set, and what it changes in the numbers.
NUMERICS_ENV: dict[str, str] = {
    "CUBLAS_WORKSPACE_CONFIG": "cuBLAS workspaces; ':4096:8' or ':16:8' make cuBLAS deterministic",
    "NVIDIA_TF32_OVERRIDE": "'0' forbids TF32 in cuBLAS and cuDNN whatever the framework asks",
    "VLLM_BATCH_INVARIANT": "vLLM's batch-invariant kernels: a row's result no longer depends on its batch",
    "VLLM_ATTENTION_BACKEND": "which attention kernel vLLM runs (each rounds differently)",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "cores vLLM-CPU leaves free, so how many threads split its reductions",
    "VLLM_CPU_OMP_THREADS_BIND": "vLLM-CPU's thread binding, and so its thread count",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "'0' builds vLLM's engine in the capsule's own process, where "
    "vLLM-CPU then sets up its OpenMP threads (no engine process; vLLM warns they may bind less well)",
    "VLLM_CPU_KVCACHE_SPACE": "vLLM-CPU's KV cache (GiB); a smaller cache preempts and re-batches requests",
    "OMP_NUM_THREADS": "OpenMP threads, so how CPU reductions are split",
    "MKL_NUM_THREADS": "MKL threads, so how its reductions are split",
    "MKL_CBWR": "MKL's conditional numerical reproducibility: one code path on every CPU",
    "MKL_ENABLE_INSTRUCTIONS": "the highest instruction set MKL dispatches to",
    "ONEDNN_MAX_CPU_ISA": "the highest instruction set oneDNN dispatches to (AVX2, AVX512_CORE_AMX, ...)",
    "ATEN_CPU_CAPABILITY": "PyTorch's CPU kernel level (default, avx2, avx512)",
    "PYTHONHASHSEED": "string hashing, so set order, in the processes a backend starts (vLLM's engine)",
}

_VALUE_RE = re.compile(r"^[\x20-\x7e]{0,256}$")  # printable ASCII: no NUL (os.environ refuses it)


def env_problem(name: object, value: object) -> str | None:
    """Why `name = value` cannot be in an arm's env (None when it can): the text of an error message."""
    if not isinstance(name, str) or name not in NUMERICS_ENV:
        allowed = ", ".join(sorted(NUMERICS_ENV))
        return (
            f"{name!r} is not a numerics variable a plan may set (allowed: {allowed}; "
            "see capsule/prereg/numerics_env.py)"
        )
    if not isinstance(value, str) or not _VALUE_RE.match(value):
        return (
            f"{name} = {value!r}: the value must be a string (quote it) of at most 256 printable "
            "ASCII characters"
        )
    return None

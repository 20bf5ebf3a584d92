"""The numerics environment an arm declares (`env` in its plan table), set while its backend lives.

A sealed `env` (CUBLAS_WORKSPACE_CONFIG, VLLM_CPU_NUM_OF_RESERVED_CPU, OMP_NUM_THREADS, ...) is read
by the libraries when they initialise: vLLM's engine process when it starts, cuBLAS when the CUDA
context is made, OpenMP when its pool starts. Every backend therefore sets it before loading its
model, records what was in force, and restores the previous values when it is closed, so the next
arm in the same process starts from the environment it would have had alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Prefixes of variables recorded beside the arm's own, because they change threading or kernels.
RECORDED_PREFIXES = ("VLLM_", "OMP_", "MKL_", "CUBLAS_", "CUDA_", "NCCL_")


class ArmEnv:
    """The arm's env vars, applied to `os.environ` on creation and undone by `restore()`."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)

    def recorded(self) -> dict[str, str]:
        """The variables in force now that can change numerics (the arm's own among them), sorted."""
        return {
            key: value
            for key, value in sorted(os.environ.items())
            if key in self._saved or key.startswith(RECORDED_PREFIXES)
        }

    def restore(self) -> None:
        """Put back what the variables were before (removing those that were unset); idempotent."""
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved = {}

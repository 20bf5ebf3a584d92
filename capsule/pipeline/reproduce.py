"""`capsule reproduce`: run a sealed plan end to end into a run directory a reader can trust.

Steps (each reads files and writes files, so a second call after any interruption continues):
verify the ledger and the plan's seal -> fetch prompts and model (verified) -> open or resume the
run directory (`opening`: run.json, the plan's copy, manifest) -> generate every arm
(`stage_generate`) -> score every arm, scorer-stability runs, analysis.json (`stage_score`) ->
RESULTS.md and the signed bundle appended to the ledger (`stage_sign`). A dry run (fake backend), a
rehearsal (`rehearsal`: real backends, stand-in model) and a probe (`probe_run`: every arm on K
prompts, then the study's cost from its step times) are signed but never appended.

The ledger is loaded once and the plan read once: the bytes hashed against the seal are the bytes
parsed and copied into the run, and the ledger appended to is the one verified (re-read at signing
only if it grew meanwhile).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from capsule.artifacts.model_store import ensure_model_dir
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.errors import BadInputError, VerificationError
from capsule.generation.backends import ENDPOINT_KEY_ENV
from capsule.hashing import sha256_file
from capsule.pipeline.lanes import LaneOptions, check_hardware, check_lanes
from capsule.pipeline.opening import (
    OpenRun,
    Say,
    StartHead,
    copy_plan,
    open_run_dir,
    recorded_in,
    signed,
    start_manifest,
)
from capsule.pipeline.probe_run import LoadTimes, Probe, ProbeCost, probe_cost, write_probe_record
from capsule.pipeline.reference_comparison import ReferenceComparison, compare_with_reference
from capsule.pipeline.rehearsal import (
    Rehearsal,
    check_rehearsal_root,
    prepare_rehearsal,
    write_rehearsal_record,
)
from capsule.prereg.ledger import Ledger
from capsule.prereg.loader import plan_file
from capsule.prereg.sealed_plan import SealedPlan, open_sealed_plan
from capsule.run_dir import DRY_RUN_ROOT, PROBE_ROOT, REHEARSAL_ROOT, RESULTS_ROOT, RunDir

if TYPE_CHECKING:
    from capsule.analysis.schema import Headline
    from capsule.evidence.signing import SigningKey
    from capsule.pipeline.stage_generate import ArmShaping
    from ifeval_scorer import Prompt


@dataclass(frozen=True)
class ReproduceOptions:
    """Where things are and how to run: none of these change a result (the plan fixes those)."""
    plan_path: Path
    ledger_path: Path
    results_root: Path
    run_dir: Path | None = None
    fresh: bool = False
    dry_run: bool = False  # every arm on the fake backend: walks the whole pipeline in seconds
    model_dir: Path | None = None
    prompts_path: Path | None = None
    signing_key: Path | None = None
    progress: bool = True
    endpoint: str | None = None  # server arms: this OpenAI-compatible endpoint instead of a launched one
    endpoint_key_env: str = ENDPOINT_KEY_ENV  # the variable holding its API key (never written)
    retry_refused: bool = False  # load the backend again for arms a resumed run records as refused
    rehearse: bool = False  # every arm shrunk on a stand-in model, real backends (pipeline.rehearsal)
    lanes: LaneOptions = LaneOptions()  # arms side by side on that many lane processes (pipeline.lanes)
    probe: int = 0  # every arm on its first `probe` prompts, then the study's cost (pipeline.probe_run)

    @property
    def recorded(self) -> bool:
        """Whether the run goes into the ledger: not a dry run, rehearsal or probe."""
        return not (self.dry_run or self.rehearse or self.probe)


def default_results_root(dry_run: bool, rehearse: bool, probe: bool = False) -> Path:
    """Where runs go when no --results is given: results/ for a recorded run, apart from it for a
    dry run, a probe and a rehearsal (none is ever recorded)."""
    if probe:
        return PROBE_ROOT
    return DRY_RUN_ROOT if dry_run else REHEARSAL_ROOT if rehearse else RESULTS_ROOT


@dataclass(frozen=True)
class ReproduceResult:
    """What a finished reproduce left on disk."""
    run_dir: Path
    run_id: str
    headline: Headline
    failed_controls: list[str]
    bundle_fingerprint: str
    verify_command: str  # what checks it: with --key where the plan does not trust the signing key
    reference: ReferenceComparison | None = None  # the run against its plan's committed reference run
    probe: ProbeCost | None = None  # a probe's measurements and the full study's cost from them


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def verify_command(run: RunDir, ledger: Ledger, plan_path: str, fingerprint: str, plan_bytes: bytes) -> str:
    """The command that verifies a run just signed: plain where its plan trusts the signing key, else
    pinned to the key the run carries (`--key`), since `capsule verify` refuses an untrusted key
    (an ephemeral one, on a first `make reproduce`) whatever the signature says."""
    from capsule.evidence.trust import untrusted_warning

    command = f"capsule verify {run.path}"
    if untrusted_warning(ledger, plan_path, fingerprint, plan_bytes):
        command += f" --key {run.public_key}  # the plan does not trust this key: see the warning above"
    return command


def reproduce(options: ReproduceOptions, say: Say) -> ReproduceResult:
    """Run a sealed plan end to end (see the module docstring); resumable at every step."""
    from capsule.evidence.signing import fingerprint_of, load_signing_key
    from capsule.evidence.trust import untrusted_warning
    from ifeval_scorer import load_prompts

    sealed = _load_for(options)
    plan, seal, ledger = sealed.plan, sealed.seal, sealed.ledger
    check_hardware(plan, options.lanes, options.recorded)
    if options.lanes != LaneOptions():
        check_lanes(plan, options.lanes)  # bad lanes or GPUs: refused before anything is written
    signer, key_line = load_signing_key(options.signing_key)  # fail on a bad key before hours of work
    fetched = fetch_prompts(options.prompts_path)
    if sha256_file(fetched.path) != plan.prompts.sha256:
        raise VerificationError(
            f"{fetched.path}: not the prompt file the plan pins ({plan.prompts.sha256[:12]}…)"
        )
    prompts = load_prompts(fetched.path)
    say(f"plan {plan.name}: sealed at ledger entry {seal.seq}; prompts from {fetched.source}")
    warning = untrusted_warning(
        ledger, _relative(sealed.file, ledger.root), fingerprint_of(signer.public_key), sealed.data
    )
    if warning and options.recorded:  # a dry run or rehearsal is never recorded, so never verified
        say(warning)
    rehearsal = prepare_rehearsal(plan, options.probe or None) if options.rehearse else None
    if rehearsal is not None:
        say(f"REHEARSAL: stand-in {rehearsal.stand_in.model_dir.name} (vLLM backends: "
            f"{rehearsal.stand_in.vllm_dir.name}); not recorded in the ledger")
        if rehearsal.stand_in.spec.vllm_shape is not None:
            say(f"REHEARSAL substitution: {rehearsal.stand_in.spec.vllm_why}")
        model_dir: Path | None = rehearsal.stand_in.model_dir
    else:
        model_dir = None if options.dry_run else ensure_model_dir(
            plan.model, options.model_dir, options.plan_path, say
        )
    shaping: ArmShaping | None = rehearsal
    if shaping is None and model_dir is not None and options.probe:
        shaping = Probe(options.probe, model_dir, plan.model.loader)
    with ExitStack() as held:  # the run directory's lock, held until the run is signed
        run = open_run_dir(
            results_root=options.results_root / plan.name,
            plan_path=_relative(sealed.file, ledger.root),
            plan_sha256=seal.sha256,
            ledger_head=start_head(ledger, _relative(sealed.file, ledger.root), seal.sha256)
            if options.recorded else ledger.head(),
            held=held,
            explicit=options.run_dir,
            fresh=options.fresh,
            finished=recorded_in(ledger) if options.recorded else signed,
        )
        return _run_opened(
            options, sealed, run, fetched.path, prompts, model_dir, signer, key_line, say, rehearsal, shaping
        )


def start_head(ledger: Ledger, plan_path: str, plan_sha256: str) -> StartHead:
    """How a new recorded run of the plan gets its start head: a `start` entry appended to the
    ledger (`Ledger.record_start`) the moment its directory is made, so that the run's start is an
    append the signer cannot place earlier afterwards (a resumed run appends nothing)."""
    return lambda run_id: ledger.record_start(plan_path, plan_sha256, run_id)


def _load_for(options: ReproduceOptions) -> SealedPlan:
    """The sealed plan; for a rehearsal or probe, `--results` inside `results/` and a plan the
    ledger has never sealed are bad input (exit 2): either tries the plan a GPU host will run, which
    must be sealed first, and never writes where committed runs live."""
    if options.rehearse or options.probe:
        ledger = Ledger.load(options.ledger_path)
        flag, what = ("--probe", "a probe") if options.probe else ("--rehearse", "a rehearsal")
        default = PROBE_ROOT if options.probe else REHEARSAL_ROOT
        check_rehearsal_root(options.results_root, ledger.root, what, default)
        relative = ledger.relative(plan_file(options.plan_path))
        if ledger.latest_for(relative) is None:
            raise BadInputError(
                f"{flag}: {relative} is not sealed in {ledger.path}; {what} runs a sealed plan "
                f"as a GPU host will: seal it first (`capsule prereg seal {relative} --note ...`)"
            )
    return open_sealed_plan(options.plan_path, options.ledger_path)


def _run_opened(
    options: ReproduceOptions,
    sealed: SealedPlan,
    run: OpenRun,
    prompts_path: Path,
    prompts: dict[int, Prompt],
    model_dir: Path | None,
    signer: SigningKey,
    key_line: str,
    say: Say,
    rehearsal: Rehearsal | None = None,
    shaping: ArmShaping | None = None,
) -> ReproduceResult:
    """The steps after the run directory is open (and locked): generate, score, report, sign."""
    from capsule.pipeline.stage_generate import GenerateInputs, generate_all
    from capsule.pipeline.stage_score import analyse, model_tokenizer
    from capsule.pipeline.stage_sign import report_and_sign

    plan, seal, ledger = sealed.plan, sealed.seal, sealed.ledger
    say(f"{'resuming' if run.resumed else 'new'} run {run.run_id} in {run.path}")
    if run.dir.is_bundled:
        say("its signing was interrupted before the ledger entry: it is signed again")
    copy_plan(run, sealed.data, seal)
    if rehearsal is not None:
        write_rehearsal_record(run.dir, rehearsal, plan)
    digest = start_manifest(run, model_dir, prompts_path, say)
    inputs = GenerateInputs(prompts, model_dir, seal.sha256, digest, prompts_path)
    loads = LoadTimes() if options.probe else None
    generate_all(
        plan, run, inputs, dry_run=options.dry_run, progress=options.progress, say=say,
        endpoint=options.endpoint, key_env=options.endpoint_key_env, retry_refused=options.retry_refused,
        shaping=shaping, lanes=options.lanes, on_load=loads.record if loads else None,
    )
    probe = None
    if loads is not None:
        probe = probe_cost(run.dir, plan, loads, _gpu_names(), rehearsed=rehearsal is not None)
        write_probe_record(run.dir, options.probe, probe)
    say("scoring and analysing")
    analysis = analyse(run.dir, plan, prompts, None if options.dry_run else model_tokenizer(model_dir))
    say(key_line)
    bundle = report_and_sign(
        run,
        plan_sha256=seal.sha256,
        manifest_digest=digest,
        key=signer,
        ledger=ledger if options.recorded else None,
    )
    kind = "probe" if options.probe else "rehearsal" if options.rehearse else "dry run"
    chained = "ledger entry appended" if options.recorded else f"{kind}: not appended to the ledger"
    say(f"signed bundle: {bundle.n_files} files, key {bundle.fingerprint}; {chained}")
    verify = verify_command(run.dir, ledger, run.record.plan_path, bundle.fingerprint, sealed.data)
    reference = None
    if options.recorded:
        say("comparing with the committed reference run of this plan")
        from capsule.evidence.trust import untrusted_warning

        untrusted = untrusted_warning(ledger, run.record.plan_path, bundle.fingerprint, sealed.data)
        reference = compare_with_reference(
            run.path, run.record.plan_path, ledger.path, pinned=untrusted is not None
        )
    return ReproduceResult(
        run.path,
        run.run_id,
        analysis.headline,
        analysis.failed_controls,
        bundle.fingerprint,
        verify,
        reference,
        probe,
    )


def _gpu_names() -> list[str]:
    """The GPUs NVML lists here, by name (none without NVML or a GPU): what a probe prices on."""
    from capsule.machine.gpu import probe_gpus

    return [str(gpu.get("name", "")) for gpu in probe_gpus()["gpus"]]

"""`capsule generate`: one arm of a sealed plan, or an ad-hoc arm with no plan, into a run directory.

Both forms write a proper run directory (`run.json`, `manifest.json`, `generations/`) and resume it
when the same command runs again:

- `--plan P --arm A`: the run directory `capsule reproduce --plan P` uses (the latest unfinished run
  of these plan bytes under `results/<plan>/`, else a new one), so reproduce continues from there.
- ad hoc (no `--plan`): the options become an `[[arms]]` table that the plan loader reads
  (`capsule.prereg.adhoc`), so they meet a sealed arm's rules. The run lands in
  `runs/adhoc/<run_id>/` with `adhoc.json`; its run.json marks it unsealed (`plan_path` "adhoc",
  ledger head "none").
- `--out DIR` names the run directory exactly; `--dry-run` runs the fake backend and tokenizer (no
  model) under `runs/dry-run/<plan or adhoc>/`, or in `DIR/dry-run`.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from capsule.atomic import check_output_dir, write_bytes_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.generation.arm_runner import ArmResult, generate_arm
from capsule.generation.backends import ENDPOINT_KEY_ENV
from capsule.generation.backends.fake import DRY_RUN_MODEL, FakeChatTokenizer
from capsule.generation.targets import Target, adhoc_target, sealed_target
from capsule.hashing import sha256_file
from capsule.pipeline.opening import (
    OpenRun,
    Say,
    open_run_dir,
    recorded_in,
    remove_unused_run,
    signed,
    start_manifest,
)
from capsule.prereg.adhoc import AdhocOptions, adhoc_bytes
from capsule.prereg.ledger import DEFAULT_LEDGER, Ledger
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class GenerateRequest:
    """What `capsule generate` was asked: a sealed plan's arm (`plan_path` and `arm_name`), else the
    ad-hoc arm of `adhoc` with its prompts (`keys_text`, else the `first` N)."""

    plan_path: Path | None
    arm_name: str | None
    adhoc: AdhocOptions
    keys_text: str | None = None
    first: int | None = None
    model_dir: Path | None = None
    dry_run: bool = False
    out_dir: Path | None = None  # the run directory itself (a dry run's is out_dir/dry-run)
    progress: bool = True
    endpoint: str | None = None
    endpoint_key_env: str = ENDPOINT_KEY_ENV
    ledger_path: Path = DEFAULT_LEDGER  # the ledger a sealed plan's arm is checked against and starts in


def generate_one(request: GenerateRequest, say: Say) -> ArmResult:
    """Resolve the request's arm (plan, seal, prompts and model verified), then generate it into its
    run directory, opened or resumed; `say` gets the progress lines."""
    if request.plan_path is not None:
        arm_name = request.arm_name
        if not arm_name:
            raise BadInputError("--plan needs --arm NAME")
        target = sealed_target(request.plan_path, arm_name, request.model_dir, request.dry_run,
                               request.ledger_path)
    else:
        target = adhoc_target(
            request.adhoc, request.keys_text, request.first, request.model_dir, request.dry_run,
            endpoint=request.endpoint is not None,
        )
    out_dir = request.out_dir
    if out_dir is not None:
        check_output_dir(out_dir, "--out directory")  # before a dry run's `dry-run/` is joined to it
    explicit = out_dir / "dry-run" if out_dir is not None and request.dry_run else out_dir
    return generate_target(
        target, explicit, request.progress, say, request.endpoint, request.endpoint_key_env
    )


def _keep_adhoc_record(run: RunDir, target: Target) -> None:
    """Write adhoc.json at the run's start; on resume check it still has the bytes run.json names."""
    if target.adhoc is None:
        return
    if not run.adhoc.exists():
        write_bytes_atomic(run.adhoc, adhoc_bytes(target.adhoc))
    elif sha256_file(run.adhoc) != target.plan_sha256:
        raise VerificationError(
            f"{run.adhoc}: differs from the run's plan_sha256; the run directory was edited"
        )


def generate_target(
    target: Target, out_dir: Path | None, progress: bool, say: Say, endpoint: str | None = None,
    key_env: str = ENDPOINT_KEY_ENV,
) -> ArmResult:
    """Open (or resume) the target's run directory, fingerprint the machine, and generate the arm,
    holding the run directory's lock throughout."""
    sealed_run = target.adhoc is None and target.model_dir is not None  # a dry run is never recorded
    existed = out_dir is not None and os.path.lexists(out_dir)
    with ExitStack() as held:
        run = open_run_dir(
            results_root=target.results_root,
            plan_path=target.plan_path,
            plan_sha256=target.plan_sha256,
            ledger_head=target.ledger_head,
            held=held,
            explicit=out_dir,
            finished=recorded_in(Ledger.load()) if sealed_run else signed,
            option="--out",
        )
        try:
            return _generate_in(run, target, progress, say, endpoint, key_env)
        except Exception:  # a refusal, or a failure before any row: leave no empty run behind
            if not run.resumed and not existed:
                remove_unused_run(run.dir)
            raise


def _generate_in(
    run: OpenRun, target: Target, progress: bool, say: Say, endpoint: str | None, key_env: str
) -> ArmResult:
    """generate_target's work once the run directory is open and locked."""
    say(f"{'resuming' if run.resumed else 'new'} run {run.run_id} in {run.path}")
    _keep_adhoc_record(run.dir, target)
    digest = start_manifest(run, target.model_dir, target.prompts_path, say, "choose another --out")
    return generate_arm(
        target.arm,
        prompts=target.prompts,
        keys=target.keys,
        model_dir=target.model_dir or DRY_RUN_MODEL,
        out_dir=run.path,
        plan_hash=target.plan_sha256,
        manifest_digest=digest,
        progress=progress,
        tokenizer=FakeChatTokenizer(supports_thinking=True) if target.model_dir is None else None,
        loader=target.loader,
        endpoint=endpoint,
        key_env=key_env,
    )

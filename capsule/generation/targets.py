"""What one `capsule generate` runs: an arm, its prompts and model, and the identity of its run.

`sealed_target` takes an arm of a sealed plan (plan, seal, prompts and model verified);
`adhoc_target` builds one from options through the plan loader (`capsule.prereg.adhoc`), so both
meet one rulebook. Nothing is written here: `capsule.pipeline.generate` opens the run directory.
A dry run (the fake backend and tokenizer) needs no model: its `model_dir` is None.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.embedded_model import fetch_model
from capsule.artifacts.model_store import resolve_model_dir, verify_local_dir
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.errors import BadInputError, VerificationError
from capsule.generation.arm_runner import subset_keys
from capsule.generation.backends import check_backend
from capsule.generation.backends.fake import dry_run_arm
from capsule.generation.backends.server_endpoint import endpoint_arm
from capsule.hashing import sha256_file
from capsule.prereg.adhoc import (
    ADHOC_PLAN_PATH,
    ADHOC_SOURCE,
    NO_LEDGER_HEAD,
    AdhocOptions,
    adhoc_arm_table,
    adhoc_record,
    adhoc_sha256,
    parse_arm_table,
)
from capsule.prereg.backend_specs import SERVER_BACKEND
from capsule.prereg.ledger import DEFAULT_LEDGER
from capsule.prereg.plan import Arm
from capsule.prereg.sealed_plan import open_sealed_plan
from capsule.run_dir import ADHOC_ROOT, DRY_RUN_ROOT, RESULTS_ROOT
from ifeval_scorer import Prompt, load_prompts

DEFAULT_FIRST = 8  # an ad-hoc run given neither --keys nor --first takes the first 8 prompts


@dataclass(frozen=True)
class Target:
    """One arm to generate and the identity of the run it belongs to, before any directory opens."""

    arm: Arm
    keys: list[int]
    prompts: dict[int, Prompt]
    prompts_path: Path
    model_dir: Path | None  # None: a dry run (the fake backend and tokenizer read no model)
    plan_path: str
    plan_sha256: str
    ledger_head: str | Callable[[str], str]  # or: a new run's id -> its start entry's hash (recorded runs)
    results_root: Path
    adhoc: dict[str, Any] | None = None  # adhoc.json's record, for an ad-hoc arm
    loader: str | None = None  # the plan's [model] loader; None for an ad-hoc arm (config.json decides)


def sealed_target(
    plan_path: Path, arm_name: str, model_dir: Path | None, dry_run: bool, ledger_path: Path = DEFAULT_LEDGER
) -> Target:
    """An arm of a sealed plan (opened once against `ledger_path`: `open_sealed_plan`), its prompts
    and model verified before anything is written."""
    sealed = open_sealed_plan(plan_path, ledger_path)
    plan, record, ledger = sealed.plan, sealed.seal, sealed.ledger
    try:
        arm = plan.arm(arm_name)
    except KeyError as error:
        names = ", ".join(a.name for a in plan.arms)
        raise BadInputError(f"{plan.path}: no arm {arm_name!r}; arms: {names}") from error
    prompts_path = fetch_prompts().path
    if sha256_file(prompts_path) != plan.prompts.sha256:
        raise VerificationError(f"{prompts_path}: sha256 differs from the plan's prompts.sha256")
    prompts = load_prompts(prompts_path)
    keys = subset_keys(plan.prompts.subsets[arm.subset], prompts)
    if dry_run:  # the same dry run as `capsule reproduce --dry-run`, so either continues the other
        arm = dry_run_arm(arm)
    directory = None if dry_run else resolve_model_dir(plan.model, model_dir)
    root = (DRY_RUN_ROOT if dry_run else RESULTS_ROOT) / plan.name
    relative = sealed.relative
    head: str | Callable[[str], str] = ledger.head()
    if not dry_run:  # a run into results/ is recorded: its start is a `start` entry of the ledger
        head = lambda run_id: ledger.record_start(relative, record.sha256, run_id)  # noqa: E731
    return Target(
        arm, keys, prompts, prompts_path, directory, relative, record.sha256, head, root,
        loader=plan.model.loader,
    )


_KEY_RE = re.compile(r"^[0-9]{1,12}$")  # ASCII digits only: int() would also take "１０００", "+7", "1_0"


def selected_keys(keys_text: str | None, first: int | None, prompts: dict[int, Prompt]) -> list[int]:
    """The prompt keys an ad-hoc run selects: `--keys` (comma-separated ASCII integers, each in the
    prompt set, none repeated) or the first `--first` prompts (1 to all of them), never both and
    never none. BadInputError naming the option and the fix otherwise."""
    if keys_text is not None and first is not None:
        raise BadInputError("give --keys or --first, not both")
    if keys_text is None:
        count = DEFAULT_FIRST if first is None else first
        if not 1 <= count <= len(prompts):
            raise BadInputError(f"--first {count}: give a number of prompts from 1 to {len(prompts)}")
        return list(prompts)[:count]
    parts = [part.strip() for part in keys_text.split(",")]
    bad = [part for part in parts if not _KEY_RE.match(part)]
    if bad:
        raise BadInputError(
            f"--keys {keys_text!r}: {bad[0]!r} is not a prompt key; give comma-separated keys in ASCII "
            "digits, e.g. --keys 1000,1001"
        )
    keys = [int(part) for part in parts]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise BadInputError(f"--keys: each key once; repeated: {repeated[:5]}")
    missing = [k for k in keys if k not in prompts]
    if missing:
        raise BadInputError(f"--keys: not in the prompt set: {missing[:5]}")
    return keys


def adhoc_target(
    options: AdhocOptions, keys_text: str | None, first: int | None, model_dir: Path | None, dry_run: bool,
    endpoint: bool = False,
) -> Target:
    """A greedy arm from options, read by the plan loader, on the pinned prompts and the embedded
    model (or `model_dir`); a dry run swaps in the fake backend after the options are checked. A
    server arm against a given `endpoint` records only what applies to one (`endpoint_arm`)."""
    table = adhoc_arm_table(options)
    arm = parse_arm_table(table, ADHOC_SOURCE)  # the options as given must pass, dry run or not
    if dry_run:
        table = adhoc_arm_table(dataclasses.replace(options, backend="fake"))
        arm = parse_arm_table(table, ADHOC_SOURCE)
    elif endpoint and arm.backend == SERVER_BACKEND:  # the arm itself is narrowed as it runs (arm_runner)
        applied = endpoint_arm(arm)
        table = {**table, "backend_options": dict(applied.backend_options), "env": dict(applied.env)}
    check_backend(arm.backend)
    prompts_path = fetch_prompts().path
    prompts = load_prompts(prompts_path)
    keys = selected_keys(keys_text, first, prompts)
    directory = None
    if not dry_run:
        directory = fetch_model()[0] if model_dir is None else model_dir
        if model_dir is not None:
            verify_local_dir(model_dir)
    record = adhoc_record(table, sha256_file(prompts_path), keys)
    root = DRY_RUN_ROOT / ADHOC_PLAN_PATH if dry_run else ADHOC_ROOT
    return Target(
        arm, keys, prompts, prompts_path, directory, ADHOC_PLAN_PATH, adhoc_sha256(record), NO_LEDGER_HEAD,
        root, record,
    )

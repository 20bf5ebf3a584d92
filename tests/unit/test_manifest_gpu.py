"""The NVML path, tested against a recorded H200 fixture (no GPU machine was available to capture one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from capsule.machine.gpu import cuda_version_text, hash_uuid, probe_gpus
from capsule.machine.manifest import build_manifest, validate_manifest

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "nvml_h200.py"


def _fixture_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nvml_h200_fixture", FIXTURE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


nvml_h200 = _fixture_module()


def test_h200_fields() -> None:
    fake = nvml_h200.FakeNvml()
    result = probe_gpus(fake)
    system, (gpu,) = result["gpu_system"], result["gpus"]
    assert system == {
        "nvml": "ok",
        "reason": None,
        "driver_version": "580.159.03",
        "cuda_driver_version": "13.0",
        "nvml_version": "13.580.159.03",
        "device_count": 1,
    }
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["memory_total_bytes"] == 143771 * 1024 * 1024
    assert gpu["compute_capability"] == "9.0" and gpu["architecture"] == "Hopper"
    assert gpu["clocks_mhz"] == {
        "sm_current": 345,
        "sm_max": 1980,
        "memory_current": 3201,
        "memory_max": 3201,
    }
    assert gpu["power_limit_w"] == 700.0
    assert gpu["ecc_mode"] == {"current": True, "pending": True}
    assert gpu["mig_mode"] == {"current": False, "pending": False}
    assert gpu["persistence_mode"] is True
    assert gpu["pcie"] == {"generation_current": 5, "generation_max": 5, "width_current": 16, "width_max": 16}
    assert gpu["unsupported"] == []
    assert fake.calls[-1] == "nvmlShutdown"


def test_uuid_is_hashed_not_stored() -> None:
    gpu = probe_gpus(nvml_h200.FakeNvml())["gpus"][0]
    raw = "GPU-fixture-0000-0000-0000-000000000000"
    assert gpu["uuid_sha256"] == hash_uuid(raw) and len(gpu["uuid_sha256"]) == 64
    assert raw not in str(gpu)


def test_unsupported_queries_become_null_and_are_listed() -> None:
    fake = nvml_h200.FakeNvml(
        unsupported={"nvmlDeviceGetEccMode", "nvmlDeviceGetMigMode", "nvmlDeviceGetVbiosVersion"}
    )
    gpu = probe_gpus(fake)["gpus"][0]
    assert gpu["ecc_mode"] is None and gpu["mig_mode"] is None and gpu["vbios_version"] is None
    assert gpu["name"] == "NVIDIA H200"
    assert sorted(u.split(":")[0] for u in gpu["unsupported"]) == ["ecc_mode", "mig_mode", "vbios_version"]


@pytest.mark.parametrize(
    "error", [OSError("NVML Shared Library Not Found"), RuntimeError("Driver Not Loaded")]
)
def test_no_nvml_gives_empty_gpus_with_reason(error: Exception) -> None:
    result = probe_gpus(nvml_h200.FakeNvml(fail_init=error))
    assert result["gpus"] == []
    assert str(error) in result["gpu_system"]["reason"]


def test_zero_devices_says_so() -> None:
    result = probe_gpus(nvml_h200.FakeNvml(device_count=0))
    assert result["gpus"] == [] and "no GPU" in result["gpu_system"]["reason"]


def test_two_gpus_and_cuda_version_text() -> None:
    assert len(probe_gpus(nvml_h200.FakeNvml(device_count=2))["gpus"]) == 2
    assert cuda_version_text(12080) == "12.8" and cuda_version_text(None) is None


def test_fixture_manifest_validates_and_is_labelled() -> None:
    manifest = nvml_h200.synthesize_h200_manifest(model_dir=None, prompts_path=None)
    validate_manifest(manifest)
    assert manifest["capture"]["source"] == "synthesized-from-fixture"
    assert "NOT CAPTURED" in manifest["capture"]["note"]
    assert build_manifest(model_dir=None, prompts_path=None, nvml=nvml_h200.FakeNvml())["gpus"][0]["name"]

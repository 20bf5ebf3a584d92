"""Fingerprint NVIDIA GPUs through NVML (`nvidia-ml-py`, imported as `pynvml`).

Every query is made separately: a field the device or driver does not support is recorded as null and
named under `unsupported`, never a crash. A machine without NVIDIA's library gets `"gpus": []` and the
reason. UUIDs are hashed so a manifest can be shared without identifying the physical card.
The NVML module is passed in, so tests run the same code against a recorded fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capsule.hashing import sha256_bytes

UUID_SALT = "capsule-gpu-uuid:"  # a fixed prefix: equal UUIDs still hash equally across manifests

# NVML's architecture enum (nvmlDeviceGetArchitecture) -> name.
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def hash_uuid(uuid: str) -> str:
    """sha256 of a GPU UUID (with a fixed prefix), so manifests can be shared."""
    return sha256_bytes((UUID_SALT + uuid).encode("utf-8"))


def cuda_version_text(value: int | None) -> str | None:
    """NVML's integer CUDA driver version (12080) as text ("12.8")."""
    if value is None:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


#: The oldest NVIDIA driver branch for each CUDA major version: a torch built for CUDA M.x runs on a
#: driver whose CUDA version is at least M.0 (CUDA's minor-version compatibility), not below it.
DRIVER_FOR_CUDA_MAJOR = {11: "R450", 12: "R525", 13: "R580"}


def driver_problem(driver_cuda: str | None, torch_cuda: str | None) -> str | None:
    """Why this driver cannot run the torch build (None when it can, or when either is unknown): the
    driver's CUDA version (NVML, "12.8") must reach the major version torch was built for ("13.0")."""
    if not driver_cuda or not torch_cuda:
        return None
    try:
        driver_major, torch_major = int(driver_cuda.split(".")[0]), int(torch_cuda.split(".")[0])
    except ValueError:
        return None
    if driver_major >= torch_major:
        return None
    needed = DRIVER_FOR_CUDA_MAJOR.get(torch_major, f"a driver for CUDA {torch_major}.0")
    return (
        f"the driver supports CUDA {driver_cuda}, torch is built for CUDA {torch_cuda}: torch cannot use "
        f"the GPU (torch.cuda.is_available() is false); install an NVIDIA driver {needed}+ "
        f"(CUDA {torch_major}.0 or newer)"
    )


class _Reader:
    """Call NVML functions one at a time, recording the ones that fail instead of raising."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.unsupported: list[str] = []

    def get(self, label: str, call: Callable[[], Any]) -> Any:
        try:
            return _text(call())
        except Exception as error:  # NVML raises a dynamically made NVMLError_* class per error code
            self.unsupported.append(f"{label}: {_text(str(error))}")
            return None


def _pair(value: Any) -> dict[str, Any] | None:
    """NVML's (current, pending) mode pair as a dict of booleans."""
    if value is None:
        return None
    current, pending = value
    return {"current": bool(current), "pending": bool(pending)}


def _device(nvml: Any, index: int) -> dict[str, Any]:
    reader = _Reader(nvml)
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    get = reader.get
    uuid = get("uuid", lambda: nvml.nvmlDeviceGetUUID(handle))
    memory = get("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    capability = get("compute_capability", lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
    arch = get("architecture", lambda: nvml.nvmlDeviceGetArchitecture(handle))
    sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
    power = get("power_limit", lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
    enforced = get("enforced_power_limit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    persistence = get("persistence_mode", lambda: nvml.nvmlDeviceGetPersistenceMode(handle))
    return {
        "index": index,
        "name": get("name", lambda: nvml.nvmlDeviceGetName(handle)),
        "uuid_sha256": hash_uuid(uuid) if uuid else None,
        "architecture": ARCHITECTURES.get(arch, f"unknown ({arch})") if arch is not None else None,
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
        "memory_total_bytes": memory.total if memory is not None else None,
        "vbios_version": get("vbios_version", lambda: nvml.nvmlDeviceGetVbiosVersion(handle)),
        "clocks_mhz": {
            "sm_current": get("clock sm", lambda: nvml.nvmlDeviceGetClockInfo(handle, sm)),
            "sm_max": get("max clock sm", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, sm)),
            "memory_current": get("clock memory", lambda: nvml.nvmlDeviceGetClockInfo(handle, mem)),
            "memory_max": get("max clock memory", lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, mem)),
        },
        "power_limit_w": power / 1000 if power is not None else None,
        "enforced_power_limit_w": enforced / 1000 if enforced is not None else None,
        "ecc_mode": _pair(get("ecc_mode", lambda: nvml.nvmlDeviceGetEccMode(handle))),
        "mig_mode": _pair(get("mig_mode", lambda: nvml.nvmlDeviceGetMigMode(handle))),
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "compute_mode": get("compute_mode", lambda: nvml.nvmlDeviceGetComputeMode(handle)),
        "pcie": {
            "generation_current": get("pcie gen", lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            "generation_max": get("pcie max gen", lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
            "width_current": get("pcie width", lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
            "width_max": get("pcie max width", lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        },
        "unsupported": reader.unsupported,
    }


def _import_nvml() -> Any:
    import pynvml  # nvidia-ml-py; a thin ctypes wrapper, cheap to import

    return pynvml


def probe_gpus(nvml: Any | None = None) -> dict[str, Any]:
    """The GPU part of a manifest: `{"gpus": [...], "gpu_system": {...}}`, absent cleanly without NVML.

    `gpu_system` holds the driver, CUDA driver and NVML versions and, when no GPU could be listed,
    `reason` saying why (library missing, driver not loaded, zero devices).
    """
    system: dict[str, Any] = {
        "nvml": "unavailable",
        "reason": None,
        "driver_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "device_count": 0,
    }
    try:
        nvml = nvml if nvml is not None else _import_nvml()
        nvml.nvmlInit()
    except Exception as error:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
        system["reason"] = f"NVML not available: {type(error).__name__}: {_text(str(error))}"
        return {"gpus": [], "gpu_system": system}
    try:
        reader = _Reader(nvml)
        system["nvml"] = "ok"
        system["driver_version"] = reader.get("driver_version", nvml.nvmlSystemGetDriverVersion)
        system["cuda_driver_version"] = cuda_version_text(
            reader.get("cuda_driver_version", nvml.nvmlSystemGetCudaDriverVersion)
        )
        system["nvml_version"] = reader.get("nvml_version", nvml.nvmlSystemGetNVMLVersion)
        count = reader.get("device_count", nvml.nvmlDeviceGetCount) or 0
        system["device_count"] = count
        gpus = [_device(nvml, index) for index in range(count)]
        if not gpus:
            system["reason"] = "NVML found no GPU" + (
                f" ({'; '.join(reader.unsupported)})" if reader.unsupported else ""
            )
        return {"gpus": gpus, "gpu_system": system}
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down is best effort; the data is already read
            pass

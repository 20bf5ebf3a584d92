"""A plain object standing in for `pynvml` on one NVIDIA H200 (SXM, 141 GB), for testing the GPU probe.

NOT captured from a device: no GPU machine was available when this was written. The driver version
(580.159.03) and memory (143771 MiB) are the values the issue quotes from a real H200; the rest are the
H200 SXM's published figures (Hopper, compute capability 9.0, 1980 MHz max SM clock, 3201 MHz memory
clock, 700 W, PCIe Gen5 x16) with idle-looking current clocks. The UUID is a made-up placeholder.

Run `python tests/data/nvml_h200.py` from the repository root to regenerate
`manifests/examples/h200-fixture.json` (this machine's host and software, GPU section from here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MIB = 1 << 20


class NVMLError(Exception):
    """Stands in for pynvml's NVMLError family (which pynvml builds per error code)."""


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's spelling
    def __str__(self) -> str:
        return "Not Supported"


@dataclass
class _Memory:
    total: int
    free: int
    used: int


@dataclass
class FakeNvml:
    """The subset of pynvml the capsule calls, answering as an idle H200 with driver 580.159.03."""

    device_count: int = 1
    driver_version: str = "580.159.03"
    cuda_driver_version: int = 13000
    name: str = "NVIDIA H200"
    memory_mib: int = 143771
    mig_current: int = 0
    unsupported: set[str] = field(default_factory=set)  # names of calls that raise NotSupported
    fail_init: Exception | None = None
    calls: list[str] = field(default_factory=list)

    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def _answer(self, call: str, value: Any) -> Any:
        self.calls.append(call)
        if call in self.unsupported:
            raise NVMLError_NotSupported()
        return value

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names throughout
        if self.fail_init is not None:
            raise self.fail_init
        self.calls.append("nvmlInit")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return self._answer("nvmlSystemGetDriverVersion", self.driver_version)

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return self._answer("nvmlSystemGetCudaDriverVersion", self.cuda_driver_version)

    def nvmlSystemGetNVMLVersion(self) -> str:  # noqa: N802
        return self._answer("nvmlSystemGetNVMLVersion", "13." + self.driver_version)

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetCount", self.device_count)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetHandleByIndex", index)

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return self._answer("nvmlDeviceGetName", self.name)

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return self._answer("nvmlDeviceGetUUID", f"GPU-fixture-0000-0000-0000-00000000000{handle}")

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:  # noqa: N802
        total = self.memory_mib * MIB
        return self._answer(
            "nvmlDeviceGetMemoryInfo", _Memory(total=total, free=total - 4 * MIB, used=4 * MIB)
        )

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:  # noqa: N802
        return self._answer("nvmlDeviceGetCudaComputeCapability", (9, 0))

    def nvmlDeviceGetArchitecture(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetArchitecture", 9)  # NVML_DEVICE_ARCH_HOPPER

    def nvmlDeviceGetVbiosVersion(self, handle: int) -> str:  # noqa: N802
        return self._answer("nvmlDeviceGetVbiosVersion", "96.00.AF.00.01")

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:  # noqa: N802
        return self._answer(
            "nvmlDeviceGetClockInfo", {self.NVML_CLOCK_SM: 345, self.NVML_CLOCK_MEM: 3201}[clock]
        )

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:  # noqa: N802
        return self._answer(
            "nvmlDeviceGetMaxClockInfo", {self.NVML_CLOCK_SM: 1980, self.NVML_CLOCK_MEM: 3201}[clock]
        )

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetPowerManagementLimit", 700_000)  # milliwatts

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetEnforcedPowerLimit", 700_000)

    def nvmlDeviceGetEccMode(self, handle: int) -> tuple[int, int]:  # noqa: N802
        return self._answer("nvmlDeviceGetEccMode", (1, 1))

    def nvmlDeviceGetMigMode(self, handle: int) -> tuple[int, int]:  # noqa: N802
        return self._answer("nvmlDeviceGetMigMode", (self.mig_current, self.mig_current))

    def nvmlDeviceGetPersistenceMode(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetPersistenceMode", 1)

    def nvmlDeviceGetComputeMode(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetComputeMode", 0)  # NVML_COMPUTEMODE_DEFAULT

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetCurrPcieLinkGeneration", 5)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetMaxPcieLinkGeneration", 5)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetCurrPcieLinkWidth", 16)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:  # noqa: N802
        return self._answer("nvmlDeviceGetMaxPcieLinkWidth", 16)


FIXTURE_NOTE = (
    "SYNTHESIZED FROM A FIXTURE, NOT CAPTURED ON AN H200: the GPU section comes from tests/data/nvml_h200.py "
    "(driver 580.159.03 and 143771 MiB as quoted from a real H200; other GPU values are the H200 SXM's "
    "published figures); host, software, model and data were captured on the 2-core CPU machine that wrote "
    "manifests/examples/cpu-2core.json (the committed example keeps that machine's hostname replaced by\n"
    "'h200-fixture'; manifests of schema version 2 record no hostname)."
)


def synthesize_h200_manifest(**build_kwargs: Any) -> dict[str, Any]:
    """A manifest of this machine with the fixture standing in for NVML, labelled as synthesized."""
    from capsule.machine.manifest import build_manifest, validate_manifest

    manifest = build_manifest(nvml=FakeNvml(), **build_kwargs)
    manifest["capture"].update(source="synthesized-from-fixture", note=FIXTURE_NOTE)
    validate_manifest(manifest)
    return manifest


if __name__ == "__main__":  # regenerate the committed example
    from pathlib import Path

    from capsule.artifacts.embedded_model import model_cache_dir
    from capsule.artifacts.pinned_prompts import prompts_cache_path
    from capsule.machine.manifest import write_manifest

    target = Path("manifests/examples/h200-fixture.json")
    write_manifest(
        target, synthesize_h200_manifest(model_dir=model_cache_dir(), prompts_path=prompts_cache_path())
    )
    print(target)

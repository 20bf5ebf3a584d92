"""Fingerprint the host: CPU model and the instruction sets kernels dispatch on, cores, RAM, OS, Python.

Standard library, `/proc/cpuinfo` and psutil only, so a manifest stays fast and needs no extra package.
The CPU's ISA matters for CPU runs: PyTorch and oneDNN pick AVX2, AVX-512 or AMX kernels at run time,
and those kernels accumulate in different orders.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import psutil

from capsule.hashing import sha256_json

CPUINFO = Path("/proc/cpuinfo")
OS_RELEASE = Path("/etc/os-release")

# CPU feature flags that select different matmul / attention kernels (x86 and Arm spellings).
KERNEL_FLAGS: tuple[str, ...] = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "asimdhp",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
)


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The first processor block of /proc/cpuinfo: model, vendor, family/model/stepping and flags."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = sorted(set((fields.get("flags") or fields.get("Features") or "").split()))
    return {
        "model": fields.get("model name")
        or fields.get("Model Name")
        or fields.get("CPU part")
        or platform.processor(),
        "vendor": fields.get("vendor_id") or fields.get("CPU implementer"),
        "family": fields.get("cpu family"),
        "model_number": fields.get("model"),
        "stepping": fields.get("stepping"),
        "microcode": fields.get("microcode"),
        "flags": flags,
    }


def _os_release() -> str | None:
    try:
        for line in OS_RELEASE.read_text(encoding="utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        return None
    return None


def probe_cpu(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """CPU identity, kernel-relevant ISA flags (as booleans), a digest of all flags, and core counts."""
    if cpuinfo_text is None:
        try:
            cpuinfo_text = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo_text = ""
    info = parse_cpuinfo(cpuinfo_text)
    flags: list[str] = info.pop("flags")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    return {
        **info,
        "architecture": platform.machine(),
        "isa": {flag: flag in flags for flag in KERNEL_FLAGS},
        "flags_sha256": sha256_json(flags),
        "n_flags": len(flags),
        "logical_cores": psutil.cpu_count(logical=True) or 0,
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": usable,
    }


def probe_host() -> dict[str, Any]:
    """The host section of a manifest: OS and kernel, CPU, memory and the Python build. No host name
    and no file path: a run travels to other machines without exposing the sender's layout."""
    build_number, build_date = platform.python_build()
    return {
        "os": {
            "system": platform.system(),
            "kernel": platform.release(),
            "kernel_version": platform.version(),
            "distribution": _os_release(),
            "libc": " ".join(platform.libc_ver()).strip() or None,
        },
        "cpu": probe_cpu(),
        "memory": {"total_bytes": psutil.virtual_memory().total},
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "build": f"{build_number} {build_date}",
            "compiler": platform.python_compiler(),
        },
    }

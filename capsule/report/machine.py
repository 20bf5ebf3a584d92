"""The machine block of RESULTS.md: CPU, memory, OS, GPUs, key software and the scorer, from the manifest."""

from __future__ import annotations

from typing import Any

from capsule.report.report_input import ReportInput


def _gib(value: Any) -> str:
    return "?" if not isinstance(value, (int, float)) else f"{value / 2**30:.1f} GiB"


def machine_block(data: ReportInput) -> list[str]:
    """The machine in a few lines from the manifest: CPU, memory, OS, GPUs, key software, scorer."""
    manifest = data.manifest
    if not manifest:
        return ["No manifest.json in this run."]
    host, software = manifest.get("host", {}), manifest.get("software", {})
    cpu, os_info = host.get("cpu", {}), host.get("os", {})
    lines = [
        f"- CPU: {cpu.get('model', '?')}, {cpu.get('logical_cores', '?')} logical cores "
        f"({cpu.get('usable_cores', '?')} usable); memory {_gib(host.get('memory', {}).get('total_bytes'))}; "
        f"{os_info.get('distribution', os_info.get('system', '?'))}, kernel {os_info.get('kernel', '?')}"
    ]
    gpus = manifest.get("gpus") or []
    system = manifest.get("gpu_system") or {}
    if gpus:
        names = ", ".join(f"{g.get('name', '?')} ({_gib(g.get('memory_total_bytes'))})" for g in gpus)
        lines.append(
            f"- GPUs: {names}; driver {system.get('driver_version', '?')}, "
            f"CUDA driver {system.get('cuda_driver_version', '?')}"
        )
    else:
        lines.append("- GPUs: none")
    packages = software.get("packages") or {}
    shown = [
        f"{e.get('distribution', n)} {e['version']}"
        for n in ("torch", "transformers", "vllm", "nltk")
        if (e := packages.get(n) or {}).get("version")
    ]
    torch_build = software.get("torch_build") or {}
    cuda = f" (CUDA {torch_build['cuda']})" if torch_build.get("cuda") else ""
    lines.append(f"- software: Python {software.get('python', '?')}; " + ", ".join(shown) + cuda)
    scorer = manifest.get("scorer") or {}
    if scorer:
        lines.append(
            f"- scorer: {scorer.get('package', '?')} {scorer.get('version', '?')}, "
            f"source digest `{str(scorer.get('source_digest', ''))[:16]}…`"
        )
    capture = manifest.get("capture") or {}
    if capture.get("created_at"):
        lines.append(f"- manifest captured {capture['created_at']} (full record: `manifest.json`)")
    return lines

"""The machine block of RESULTS.md: CPU, memory, OS, GPUs, key software and the scorer, from the manifest."""

from __future__ import annotations

from capsule.report.report_input import ReportInput


def _gib(value: float | None) -> str:
    return "?" if value is None else f"{value / 2**30:.1f} GiB"


def machine_block(data: ReportInput) -> list[str]:
    """The machine in a few lines from the manifest: CPU, memory, OS, GPUs, key software, scorer."""
    m = data.manifest
    if m is None or not m.data:
        return ["No manifest.json in this run."]
    lines = [
        f"- CPU: {m.cpu_model}, {m.logical_cores} logical cores ({m.usable_cores} usable); "
        f"memory {_gib(m.memory_total_bytes)}; {m.os_name}, kernel {m.kernel}"
    ]
    if m.gpus:
        names = ", ".join(f"{g.name} ({_gib(g.memory_total_bytes)})" for g in m.gpus)
        lines.append(f"- GPUs: {names}; driver {m.driver_version}, CUDA driver {m.cuda_driver_version}")
    else:
        lines.append("- GPUs: none")
    shown = [f"{distribution} {version}" for distribution, version in m.packages]
    cuda = f" (CUDA {m.torch_cuda})" if m.torch_cuda else ""
    lines.append(f"- software: Python {m.python}; " + ", ".join(shown) + cuda)
    if m.scorer is not None:
        lines.append(
            f"- scorer: {m.scorer.package} {m.scorer.version}, source digest `{m.scorer.source_digest[:16]}…`"
        )
    if m.captured_at:
        lines.append(f"- manifest captured {m.captured_at} (full record: `manifest.json`)")
    return lines

"""What a sealed plan costs on a device: the lines `capsule plan cost` prints, and the ones
`capsule reproduce` prints before the first arm on a host with a GPU."""

from __future__ import annotations

from pathlib import Path

from capsule.costing.cost_lines import cost_lines
from capsule.costing.devices import Device, DeviceTable, device_table, match_device
from capsule.costing.response_lengths import length_models
from capsule.costing.sizing import estimate_plan
from capsule.errors import BadInputError, CapsuleError, VerificationError
from capsule.prereg.engine_sharing import check_lane_count
from capsule.prereg.sealed_plan import open_sealed_plan


def match_host(table: DeviceTable, gpu_names: list[str] | None = None) -> Device | None:
    """The table's device this host matches: its first GPU by name (`gpu_names`, else NVML's), else
    its CPU by vendor, ISA flags and family; None where nothing matches."""
    from capsule.machine.gpu import probe_gpus  # NVML: only when the caller has not read the GPUs
    from capsule.machine.host import probe_cpu

    if gpu_names is None:
        gpu_names = [str(g.get("name", "")) for g in probe_gpus()["gpus"]]
    cpu = probe_cpu()
    flags = {flag for flag, present in cpu["isa"].items() if present}
    return match_device(table, gpu_names, str(cpu.get("vendor", "")), flags, str(cpu.get("family", "")))


def host_device(table: DeviceTable) -> str:
    """The name of the table's device this host matches (`match_host`); bad input where none does."""
    from capsule.machine.gpu import probe_gpus

    gpus = [str(g.get("name", "")) for g in probe_gpus()["gpus"]]
    device = match_host(table, gpus)
    if device is None:
        raise BadInputError(
            f"this host matches no device of the throughput table (GPUs: {gpus or 'none'}); "
            "name one with --gpu (`--gpu help` lists them)"
        )
    return device.name


def gpu_cost_lines(plan_path: Path, ledger_path: Path) -> list[str]:
    """What `capsule reproduce` prints before the first arm on a host with a GPU: the plan's cost on
    that GPU (or one line saying why it cannot be estimated); nothing on a host without one."""
    from capsule.machine.gpu import probe_gpus

    if not probe_gpus()["gpus"]:
        return []
    try:
        return plan_cost_lines(plan_path, ledger_path, None, 1)
    except CapsuleError as error:
        return [f"cost: not estimated ({error})"]


def plan_cost_lines(
    plan_path: Path, ledger_path: Path, gpu: str | None, lanes: int, gpu_count: int = 1
) -> list[str]:
    """`capsule plan cost`'s lines for a sealed plan on device `gpu` (default: this host's).
    An unsealed or malformed plan, an unknown device, or more lanes than the plan has units to
    run side by side (`check_lane_count`, as `reproduce --lanes`) is bad input (exit 2)."""
    table = device_table()
    device = table.device(gpu if gpu is not None else host_device(table))
    try:
        plan = open_sealed_plan(plan_path, ledger_path).plan
    except VerificationError as error:
        raise BadInputError(f"{error}; `capsule plan cost` prices sealed plans only") from error
    check_lane_count(plan, lanes)
    estimate = estimate_plan(plan, table, device, length_models(), gpu_count)
    return cost_lines(estimate, str(plan_path), lanes)

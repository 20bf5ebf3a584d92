"""The throughput table (`throughput.toml` beside this module): per device, backend, dtype and batch
size, the generated tokens per second that `capsule plan cost` prices an arm at, each with its source.

Read once, strictly (unknown keys refused, as in plan files). A figure between two tabulated batch
sizes interpolates the per-step time (batch / tok_per_s) linearly, which is the overhead + per-row
model the v3 rationale sizes the embedded plan with; beyond them it extrapolates the nearest two.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from capsule.errors import BadInputError
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.plan import DTYPES, Arm
from capsule.prereg.tables import Section

TABLE = Path(__file__).with_name("throughput.toml")
KINDS = ("gpu", "cpu")
BACKENDS = ("vllm", "hf")  # the rows of step times: each backend is priced as one (`BackendSpec.priced_as`)


@dataclass(frozen=True)
class Figure:
    """One measured or estimated throughput: `tok_per_s` generated tokens/s at `batch` sequences."""

    backend: str
    dtype: str
    batch: int
    tok_per_s: float
    source: str


@dataclass(frozen=True)
class Slowdown:
    """A numerics setting that divides throughput by `factor` on devices of `kind` (invariant kernels)."""

    env: str
    value: str
    factor: float
    kind: str
    source: str


@dataclass(frozen=True)
class Refusal:
    """A backend expected to refuse a model's arms that set `env`=`value` at start-up, on devices of
    `kind`: such an arm generates nothing expected (`capsule plan cost` still pays its start)."""

    model: str  # a prefix of the plan's `[model] name`
    backend: str
    env: str
    value: str
    kind: str
    source: str


@dataclass(frozen=True)
class Device:
    """One device: `match` picks it for a host (a GPU name substring; for a CPU, its vendor, ISA flags
    and optionally `family=N`, space-separated, all of which the host must have)."""

    name: str
    kind: str
    match: str
    description: str
    start_s: dict[str, float]
    start_source: str
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class Throughput:
    """What an arm is priced at on a device, and why."""

    tok_per_s: float
    source: str


@dataclass(frozen=True)
class DeviceTable:
    """Every device, slowdown and expected refusal of the table, in file order."""

    devices: tuple[Device, ...]
    slowdowns: tuple[Slowdown, ...]
    refusals: tuple[Refusal, ...] = ()

    def refusal(self, model_name: str, device: Device, arm: Arm) -> Refusal | None:
        """The refusal the table expects for `arm` of a plan of `model_name` on `device`, if any."""
        backend = SPECS[arm.backend].priced_as or arm.backend
        for refusal in self.refusals:
            if (
                model_name.startswith(refusal.model)
                and refusal.backend == backend
                and refusal.kind == device.kind
                and arm.env.get(refusal.env) == refusal.value
            ):
                return refusal
        return None

    def device(self, name: str) -> Device:
        """The device called `name`; BadInputError listing the known names otherwise."""
        for device in self.devices:
            if device.name == name:
                return device
        known = ", ".join(d.name for d in self.devices)
        raise BadInputError(
            f"unknown device {name!r} (known: {known}; `capsule plan cost --gpu help` lists them)"
        )


def _figure(section: Section) -> Figure:
    section.keys(("backend", "dtype", "batch", "tok_per_s", "source"))
    return Figure(
        section.text("backend", BACKENDS),
        section.text("dtype", DTYPES),
        section.integer("batch", 1),
        section.number("tok_per_s", 1e-3, 1e7),
        section.text("source"),
    )


def _device(section: Section) -> Device:
    section.keys(("name", "kind", "match", "description", "start_s", "start_source", "figures"))
    starts = section.sub("start_s", "start_s")
    starts.keys(("vllm", "server", "hf"))
    figures = section.data["figures"]
    if not isinstance(figures, list) or not figures:
        raise section.fail("'figures' must be a non-empty array of tables")
    return Device(
        section.text("name"),
        section.text("kind", KINDS),
        section.text("match"),
        section.text("description"),
        {key: starts.number(key, 0.0, 1e5) for key in ("vllm", "server", "hf")},
        section.text("start_source"),
        tuple(
            _figure(Section(section.file, f"{section.where}.figures[{i}]", f)) for i, f in enumerate(figures)
        ),
    )


def parse_table(text: str, file: str) -> DeviceTable:
    """The table in `text` (TOML); BadInputError naming `file` and the table on any fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BadInputError(f"{file}: not valid TOML: {error}") from error
    top = Section(file, "top level", data)
    top.keys(("devices",), ("slowdowns", "refusals"))
    devices = tuple(_device(Section(file, f"devices[{i}]", d)) for i, d in enumerate(data["devices"]))
    slowdowns = []
    for i, raw in enumerate(data.get("slowdowns", [])):
        s = Section(file, f"slowdowns[{i}]", raw)
        s.keys(("env", "value", "factor", "devices", "source"))
        slowdowns.append(
            Slowdown(
                s.text("env"),
                s.text("value"),
                s.number("factor", 1.0, 100.0),
                s.text("devices", KINDS),
                s.text("source"),
            )
        )
    refusals = []
    for i, raw in enumerate(data.get("refusals", [])):
        r = Section(file, f"refusals[{i}]", raw)
        r.keys(("model", "backend", "env", "value", "devices", "source"))
        refusals.append(
            Refusal(
                r.text("model"),
                r.text("backend", BACKENDS),
                r.text("env"),
                r.text("value"),
                r.text("devices", KINDS),
                r.text("source"),
            )
        )
    return DeviceTable(devices, tuple(slowdowns), tuple(refusals))


@cache
def device_table() -> DeviceTable:
    """The committed table (`throughput.toml`), parsed once."""
    return parse_table(TABLE.read_text(encoding="utf-8"), str(TABLE))


def _step_s(a: Figure, b: Figure, batch: int) -> float:
    """Per-step seconds at `batch`, on the line through two figures' per-step times."""
    step_a, step_b = a.batch / a.tok_per_s, b.batch / b.tok_per_s
    slope = (step_b - step_a) / (b.batch - a.batch)
    return max(step_a + slope * (batch - a.batch), min(step_a, step_b) * 0.5)


def _nearest_two(figures: Sequence[Figure], batch: int) -> tuple[Figure, Figure]:
    nearest = sorted(figures, key=lambda f: (abs(f.batch - batch), f.batch))[:2]
    low, high = sorted(nearest, key=lambda f: f.batch)
    return low, high


def step_seconds(figures: Sequence[Figure], batch: int) -> float:
    """Seconds per generation step at `batch` from one backend and dtype's figures: the figure at
    that batch, else the one figure's tok/s held, else the line through the two nearest figures'
    step times. The one rule that prices an arm and calibrates a table against a probe."""
    exact = [f for f in figures if f.batch == batch]
    if exact:
        return batch / exact[0].tok_per_s
    if len(figures) == 1:
        return batch / figures[0].tok_per_s
    low, high = _nearest_two(figures, batch)
    return _step_s(low, high, batch)


def arm_throughput(table: DeviceTable, device: Device, arm: Arm) -> Throughput:
    """The tokens/s `arm` generates at on `device`, with the figures (and slowdowns) it rests on.

    BadInputError when the device has no figure for the arm's backend and dtype."""
    backend = SPECS[arm.backend].priced_as or arm.backend
    figures = sorted(
        (f for f in device.figures if f.backend == backend and f.dtype == arm.dtype), key=lambda f: f.batch
    )
    if not figures:
        having = [
            d.name
            for d in table.devices
            if any(f.backend == backend and f.dtype == arm.dtype for f in d.figures)
        ]
        raise BadInputError(
            f"device {device.name!r} has no throughput figure for {backend} {arm.dtype} (arm {arm.name!r}); "
            f"price it on one that has (--gpu {' | '.join(having) or 'none'}) or add a measured figure "
            f"to {TABLE.name}"
        )
    tok_per_s = arm.batch_size / step_seconds(figures, arm.batch_size)
    exact = [f for f in figures if f.batch == arm.batch_size]
    if exact:
        source = exact[0].source
    elif len(figures) == 1:
        source = f"{figures[0].source} (the one figure, at batch {figures[0].batch})"
    else:
        low, high = _nearest_two(figures, arm.batch_size)
        source = (
            f"step time interpolated between batch {low.batch} and {high.batch} ({low.source}; {high.source})"
        )
    for slowdown in table.slowdowns:
        if slowdown.kind == device.kind and arm.env.get(slowdown.env) == slowdown.value:
            tok_per_s /= slowdown.factor
            source += f"; / {slowdown.factor:g} for {slowdown.env}={slowdown.value} ({slowdown.source})"
    return Throughput(tok_per_s, source)


def match_device(
    table: DeviceTable, gpu_names: list[str], cpu_vendor: str, cpu_flags: set[str], cpu_family: str = ""
) -> Device | None:
    """The first device the host matches: a GPU whose name contains a GPU entry's `match`, else the
    first CPU entry whose vendor, flags (and `family=N`, where given) the host has; None otherwise."""
    for device in table.devices:
        if device.kind == "gpu" and any(device.match in name for name in gpu_names):
            return device
    host = {cpu_vendor, f"family={cpu_family}"} | cpu_flags
    for device in table.devices:
        if device.kind == "cpu" and set(device.match.split()) <= host:
            return device
    return None

"""`capsule reproduce --probe K`'s arithmetic: batch timings read from a run's rows, a device
calibrated by them (`capsule.costing.measured`), and the full study priced on it; the option's
refusals. The real-model probe end to end is tests/integration/test_probe_real.py."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from reference_runs import REPO, V3_RUN

from capsule.cli import cli
from capsule.costing.devices import Device, Figure, device_table, match_device, step_seconds
from capsule.costing.measured import ArmTiming, Measured, measured_device
from capsule.costing.response_lengths import length_models
from capsule.costing.sizing import estimate_plan
from capsule.pipeline.probe_run import arm_timings
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.loader import load_plan
from capsule.run_dir import RunDir

EMBEDDED = REPO / "prereg" / "smollm2-135m-v3"


def _base() -> Device:
    return Device(
        "toy", "gpu", "Toy", "a toy GPU", {"vllm": 60.0, "server": 80.0, "hf": 20.0}, "toy starts",
        (
            Figure("hf", "bfloat16", 8, 8 / 0.030, "toy hf 8"),
            Figure("hf", "bfloat16", 24, 24 / 0.036, "toy hf 24"),
            Figure("vllm", "bfloat16", 8, 8 / 0.010, "toy vllm 8"),
        ),
    )


def test_table_figures_are_scaled_by_the_probes_step_time_ratio() -> None:
    base = _base()
    table_step_at_2 = step_seconds([f for f in base.figures if f.backend == "hf"], 2)
    measured = Measured(
        (
            ArmTiming("a", "hf", "bfloat16", 2, 100, 100 * table_step_at_2 * 1.5),  # 1.5x the table's
            ArmTiming("b", "hf", "bfloat16", 2, 50, 50 * table_step_at_2 * 1.5),
        ),
        (("hf", 12.0), ("hf", 14.0), ("hf", 40.0)),
    )
    device = measured_device(measured, base, "gpu")
    hf = {f.batch: f for f in device.figures if f.backend == "hf"}
    assert set(hf) == {8, 24}  # the table's batch sizes, each 1.5x slower
    assert hf[8].tok_per_s == pytest.approx(8 / 0.030 / 1.5)
    assert hf[24].tok_per_s == pytest.approx(24 / 0.036 / 1.5)
    assert "probe-calibrated" in hf[8].source and "x 1.5" in hf[8].source
    (vllm,) = [f for f in device.figures if f.backend == "vllm"]
    assert vllm == base.figures[2]  # a row the probe did not run keeps the table's figure
    assert device.start_s == {"hf": 14.0, "vllm": 60.0, "server": 80.0}  # the median of three loads
    assert "hf 14.0 s (median of 3 load(s))" in device.start_source


def test_without_a_table_device_the_probes_figures_are_the_device() -> None:
    measured = Measured(
        (
            ArmTiming("a", "server", "float32", 2, 10, 1.0),  # a server arm is priced as vLLM
            ArmTiming("b", "vllm", "float32", 2, 10, 3.0),
            ArmTiming("c", "vllm", "float32", 1, 10, 1.0),
        ),
        (),
    )
    device = measured_device(measured, None, "cpu")
    figures = {f.batch: f for f in device.figures}
    assert {f.backend for f in device.figures} == {"vllm"}
    assert figures[2].tok_per_s == pytest.approx(2 / 0.2)  # median step time of 0.1 and 0.3 s
    assert figures[1].tok_per_s == pytest.approx(1 / 0.1)
    assert device.start_s == {"vllm": 0.0, "server": 0.0, "hf": 0.0}
    assert "not measured" in device.start_source and device.kind == "cpu"


def test_a_probe_of_the_whole_reference_run_prices_it_as_it_ran() -> None:
    """The reference run's own rows and sidecars, read as a probe reads them, price that run's arms
    within 10% of the seconds each took, and its generation in all within 5%, whether they calibrate
    the table's device for its CPU or stand alone. The exception is an arm priced on another
    backend's row (a server arm, as vLLM): the first server arm ran 33% slower than its rerun."""
    plan = load_plan(EMBEDDED)
    timings = arm_timings(RunDir(V3_RUN), plan.arms)
    assert [t.arm for t in timings] == [a.name for a in plan.arms]
    for timing in timings:  # the rows it ran at once, its tokens spread over them (the table's reading)
        arm = next(a for a in plan.arms if a.name == timing.arm)
        rows = [json.loads(line) for line in (V3_RUN / "generations" / f"{arm.name}.jsonl").open()]
        assert timing.rows == min(len(rows), arm.batch_size)
        assert timing.steps == -(-sum(row["n_output_tokens"] for row in rows) // timing.rows)
    cpu = json.loads((V3_RUN / "manifest.json").read_text())["host"]["cpu"]
    flags = {flag for flag, present in cpu["isa"].items() if present}
    table = device_table()
    base = match_device(table, [], cpu["vendor"], flags, str(cpu["family"]))
    assert base is not None
    took = {
        arm.name: json.loads((V3_RUN / "generations" / f"{arm.name}.meta.json").read_text())["elapsed_s"]
        for arm in plan.arms
    }
    for calibrates in (base, None):
        device = measured_device(Measured(tuple(timings), ()), calibrates, "cpu")
        estimate = estimate_plan(plan, table, device, length_models())
        for arm in estimate.arms:
            own_row = SPECS[arm.backend].priced_as == arm.backend
            assert arm.minutes_expected * 60 == pytest.approx(took[arm.arm], rel=0.10 if own_row else 0.30)
        generation = sum(arm.minutes_expected for arm in estimate.arms) * 60
        assert generation == pytest.approx(sum(took.values()), rel=0.05)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--probe", "2", "--dry-run"], "--dry-run"),
        (["--probe", "2", "--lanes", "2"], "--lanes"),
        (["--probe", "0"], "--probe"),
        (["--probe", "2", "--results", "results"], "never goes into results/"),
    ],
)
def test_bad_probe_options_are_refused_exit_2_before_anything_is_written(
    extra: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    probes = REPO / "runs" / "probe"
    before = sorted(probes.rglob("*")) if probes.exists() else None
    results = sorted(p.name for p in (REPO / "results").rglob("*"))
    result = CliRunner().invoke(cli, ["reproduce", "--no-progress", *extra])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in (REPO / "results").rglob("*")) == results
    assert (sorted(probes.rglob("*")) if probes.exists() else None) == before

"""`capsule plan cost`: the arithmetic against the committed v3 run's measured per-arm times, the
response-length and throughput models, lanes, and each refusal (one `Error:` line, exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from reference_runs import REPO, V3_RUN

from capsule.cli import cli
from capsule.costing.devices import device_table, match_device, parse_table
from capsule.costing.lane_plan import arrange
from capsule.costing.response_lengths import length_models, parse_lengths
from capsule.costing.sizing import estimate_plan
from capsule.errors import BadInputError
from capsule.prereg.engine_sharing import engine_runs
from capsule.prereg.loader import load_plan

LEDGER = REPO / "prereg" / "ledger.jsonl"
EMBEDDED = REPO / "prereg" / "smollm2-135m-v3"
GPU_PLAN = REPO / "prereg" / "agents-a1-4b-v3"


def _cost(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plan", "cost", *args, "--ledger", str(LEDGER)])
    return result.exit_code, result.output


def _measured_seconds(run: Path) -> dict[str, float]:
    return {
        meta.name.removesuffix(".meta.json"): float(json.loads(meta.read_text())["elapsed_s"])
        for meta in (run / "generations").glob("*.meta.json")
    }


def _run_device_name(run: Path) -> str:
    """The table's device for the CPU the run's manifest records."""
    cpu = json.loads((run / "manifest.json").read_text())["host"]["cpu"]
    flags = {flag for flag, present in cpu["isa"].items() if present}
    device = match_device(device_table(), [], cpu["vendor"], flags, str(cpu["family"]))
    assert device is not None, cpu
    return device.name


def test_embedded_plan_estimate_is_within_25_percent_of_the_reference_run_per_arm() -> None:
    table = device_table()
    device = table.device(_run_device_name(V3_RUN))  # the CPU kind the committed run was made on
    estimate = estimate_plan(load_plan(EMBEDDED), table, device, length_models())
    measured = _measured_seconds(V3_RUN)
    assert {a.arm for a in estimate.arms} == set(measured)
    for arm in estimate.arms:
        seconds = arm.minutes_expected * 60.0
        assert abs(seconds - measured[arm.arm]) <= 0.25 * measured[arm.arm], (
            arm.arm,
            seconds,
            measured[arm.arm],
        )
        assert arm.tokens_expected <= arm.tokens_most == arm.prompts * arm.budget
    # the whole run (29m22s with manifest, scoring and signing) against starts + generation
    assert 0.75 * 29.4 <= estimate.sequential() <= 29.4


def test_cost_prints_every_arm_totals_and_sources_for_the_gpu_study_on_h200() -> None:
    code, out = _cost(str(GPU_PLAN), "--gpu", "h200", "--lanes", "4")
    assert code == 0, out
    plan = load_plan(GPU_PLAN)
    for arm in plan.arms:
        assert any(line.startswith(arm.name + " ") for line in out.splitlines()), arm.name
    assert "sequential:" in out and "with 4 lane(s)," in out and "critical path: lane" in out
    table = device_table()
    estimate = estimate_plan(plan, table, table.device("h200"), length_models())
    # Agents-A1-4B's lengths are the rationale's assumptions, labelled so, never "measured"
    for priced in estimate.arms:
        assert priced.length_source.startswith("assumed (not measured): prereg/agents-a1-4b-v3/rationale.md")
        if not priced.refused:
            assert priced.tokens_expected < priced.tokens_most
            assert priced.minutes_expected < priced.minutes_most
    assert "no measured response lengths" not in out


def test_gpu_study_fits_an_hour_on_one_h200_only_with_batch_shares_below_its_longest_arm() -> None:
    """Engine runs never split cannot fit the hour; split loads with batch shares can, and the
    longest transformers arm (the old floor: lanes placed whole arms) no longer bounds it."""
    table = device_table()
    for gpus in (1, 8):
        estimate = estimate_plan(load_plan(GPU_PLAN), table, table.device("h200"), length_models(), gpus)
        hf = [a for a in estimate.arms if a.backend == "hf"]
        longest = max(hf, key=lambda a: a.minutes_expected)
        floor = table.device("h200").start_s["hf"] / 60.0 + longest.minutes_expected
        assert arrange(estimate, len(estimate.runs), split_loads=False).minutes > 60.0
        best = arrange(estimate, 8, split_loads=True)
        assert best.minutes < min(60.0, floor)  # below the arm that was the floor
        assert sorted({n for lane in best.lanes for n in lane.arms}) == sorted(a.arm for a in estimate.arms)
        batches = dict(estimate.shareable)
        shared = {name for lane in best.lanes for name, _ in lane.shards}
        assert longest.arm in shared
        for name in shared:  # an arm's shares on the lanes cover each of its batches once
            shards = [dict(lane.shards)[name] for lane in best.lanes if name in dict(lane.shards)]
            assert sum(s.batches(batches[name]) for s in shards) == batches[name]
            assert sorted(i for s in shards for i in s.indices) == list(range(shards[0].count))


def test_expected_refusals_generate_nothing_expected_but_pay_their_start() -> None:
    table = device_table()
    plan = load_plan(GPU_PLAN)
    one = {a.arm: a for a in estimate_plan(plan, table, table.device("h200"), length_models()).arms}
    two = {a.arm: a for a in estimate_plan(plan, table, table.device("h200"), length_models(), 2).arms}
    invariant = one["vllm-bi-run1-b8"]
    assert invariant.refused.startswith("refused at start") and invariant.minutes_expected == 0.0
    assert invariant.minutes_most > 0.0 and invariant.start_s > 0.0  # at most: as if it ran
    assert one["hf-run3a-b16-gpu1"].refused.startswith("refused at load: cuda:1 is absent")
    assert one["hf-run3a-b16-gpu1"].minutes_most == 0.0
    assert not two["hf-run3a-b16-gpu1"].refused
    assert two["hf-run3a-b16-gpu1"].minutes_expected == pytest.approx(two["hf-run3a-b16"].minutes_expected)
    # a static transformers batch costs batches x its longest member's steps x the step time
    arm = one["hf-run3b-b8"]
    assert arm.arithmetic.startswith("10 batches x 11000 steps (at most 16384)")
    assert arm.minutes_expected / arm.minutes_most == pytest.approx(11000 / 16384)


def test_gpu_help_lists_every_device_with_sources() -> None:
    code, out = _cost("--gpu", "help")
    assert code == 0, out
    for name in ("h200", "h100", "a100", "l40", "xeon-avx512-2c", "epyc-avx2-2c"):
        assert f"\n{name} " in out
    assert "measured: primary, 168,388 tokens in 939.6 s" in out


@pytest.mark.parametrize("extra", [["--gpu", "tpu9"], ["--lanes", "0"], ["--gpu-count", "0"]])
def test_bad_options_are_one_error_line_exit_2(extra: list[str]) -> None:
    code, out = _cost(str(EMBEDDED), *extra)
    assert code == 2
    assert out.count("\n") == 1 and out.startswith("Error:")


@pytest.mark.parametrize("content", [None, "name = [broken", 'name = "x"\n'])
def test_unsealed_missing_or_malformed_plan_is_one_error_line_exit_2(
    tmp_path: Path, content: str | None
) -> None:
    root = tmp_path / "repo"
    (root / "prereg" / "p").mkdir(parents=True)
    shutil.copy(LEDGER, root / "prereg" / "ledger.jsonl")
    if content is not None:
        (root / "prereg" / "p" / "plan.toml").write_text(content)
    result = CliRunner().invoke(
        cli,
        [
            "plan",
            "cost",
            str(root / "prereg" / "p"),
            "--gpu",
            "h200",
            "--ledger",
            str(root / "prereg" / "ledger.jsonl"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("Error:")


def test_throughput_interpolates_step_time_and_applies_slowdowns() -> None:
    table = device_table()
    plan = load_plan(GPU_PLAN)
    arms = {a.name: a for a in plan.arms}
    h200 = table.device("h200")
    estimate = {a.arm: a for a in estimate_plan(plan, table, h200, length_models()).arms}
    # batch 16 lies between the batch-8 and batch-24 figures: step time 8.69 + (11.28 - 8.69) / 2 ms
    assert estimate["vllm-authors"].tok_per_s == pytest.approx(16 / ((8 / 921 + 24 / 2128) / 2))
    assert "interpolated between batch 8 and 24" in estimate["vllm-authors"].throughput_source
    assert estimate["vllm-server-authors"].tok_per_s == estimate["vllm-authors"].tok_per_s  # server = vLLM
    assert estimate["vllm-bi-run1-b24"].tok_per_s == pytest.approx(2128 / 2.5)
    assert arms["vllm-bi-run1-b24"].env == {"VLLM_BATCH_INVARIANT": "1"}


def test_response_length_model_interpolates_and_extrapolates() -> None:
    (model,) = parse_lengths(
        '[[models]]\nname = "M"\nthinking = "off"\npoints = [[100, 80.0], [200, 120.0]]\n'
        'at_cap = 0.5\nsource = "s"\n',
        "t.toml",
    )
    assert model.expected(50) == pytest.approx(40.0)
    assert model.expected(150) == pytest.approx(100.0)
    assert model.expected(400) == pytest.approx(220.0)  # half the rows run on to the new budget
    (stated,) = parse_lengths(
        '[[models]]\nname = "M"\nthinking = "on"\npoints = [[100, 50.0]]\nlongest = [[100, 8, 90.0]]\n'
        'source = "assumed"\n',
        "t.toml",
    )
    assert stated.batch_steps(100, 8) == 90.0 and stated.batch_steps(100, 16) is None
    assert stated.expected(200) == pytest.approx(150.0)  # no at_cap: every row runs on (upper reading)
    with pytest.raises(BadInputError, match="longest"):
        parse_lengths(
            '[[models]]\nname = "M"\nthinking = "on"\npoints = [[100, 50.0]]\nlongest = [[100, 8, 200.0]]\n'
            'source = "s"\n',
            "t",
        )
    with pytest.raises(BadInputError, match="points"):
        parse_lengths(
            '[[models]]\nname = "M"\nthinking = "off"\npoints = [[10, 20.0]]\nat_cap = 0.5\nsource = "s"\n',
            "t",
        )


def test_device_table_is_strict_and_hosts_match_by_gpu_name_or_cpu_vendor_and_flag() -> None:
    with pytest.raises(BadInputError, match="unknown key 'speed'"):
        parse_table('[[devices]]\nname = "x"\nspeed = 1\n', "t.toml")
    table = device_table()
    assert match_device(table, ["NVIDIA H200"], "AuthenticAMD", {"avx2"}).name == "h200"  # type: ignore[union-attr]
    assert match_device(table, [], "GenuineIntel", {"avx2", "avx512_bf16"}).name == "xeon-avx512-2c"  # type: ignore[union-attr]
    assert match_device(table, [], "AuthenticAMD", {"avx2"}).name == "epyc-avx2-2c"  # type: ignore[union-attr]
    # this session's machine: AMD family 26 with avx512_bf16 is its own kind, before the older EPYC's
    family_26 = match_device(table, [], "AuthenticAMD", {"avx2", "avx512_bf16"}, "26")
    assert family_26 is not None and family_26.name == "epyc-f26-avx512-2c"
    assert match_device(table, [], "AuthenticAMD", {"avx2", "avx512_bf16"}, "25").name == "epyc-avx512-2c"  # type: ignore[union-attr]
    # it prices the embedded plan (fp32 and bf16, both backends), unlike the bf16-only older entry
    assert len(estimate_plan(load_plan(EMBEDDED), table, family_26, length_models()).arms) == 12
    assert match_device(table, [], "Other", set()) is None


def test_engine_runs_group_consecutive_arms_that_share_a_backend() -> None:
    runs = engine_runs(load_plan(EMBEDDED).arms)
    assert [[a.name for a in run] for run in runs][:2] == [
        ["primary", "vllm-fp32-b48", "vllm-fp32-b48-rerun"],
        ["vllm-fp32-b1"],
    ]
    assert len(runs) == 7


def test_reproduce_prints_the_cost_on_a_gpu_host_before_the_first_arm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from capsule.commands import reproduce as reproduce_command
    from capsule.machine import gpu

    monkeypatch.setattr(gpu, "probe_gpus", lambda: {"gpus": [{"name": "NVIDIA H200"}]})

    def first_arm(*_args: object, **_kwargs: object) -> None:
        raise SystemExit(9)  # stands in for the run: the cost must already be out

    monkeypatch.setattr(reproduce_command, "run_plan", first_arm)
    result = CliRunner().invoke(cli, ["reproduce", "--plan", str(GPU_PLAN), "--ledger", str(LEDGER)])
    assert result.exit_code == 9
    assert f"{GPU_PLAN} on h200" in result.output and "sequential:" in result.output
    monkeypatch.setattr(gpu, "probe_gpus", lambda: {"gpus": []})
    result = CliRunner().invoke(cli, ["reproduce", "--plan", str(GPU_PLAN), "--ledger", str(LEDGER)])
    assert result.exit_code == 9 and "sequential:" not in result.output

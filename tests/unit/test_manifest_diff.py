"""`capsule manifest diff`: categories on the committed examples, rule coverage, and the CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.machine.diff import (
    _UNCLASSIFIED,
    NUMERICS,
    OTHER,
    _paths,
    classify,
    diff_manifests,
    format_diff,
)
from capsule.machine.manifest import load_manifest
from capsule.run_dir import MANIFEST

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"
CPU_EXAMPLE = EXAMPLES / "cpu-2core.json"
H200_EXAMPLE = EXAMPLES / "h200-fixture.json"


@pytest.fixture(scope="module")
def cpu() -> dict[str, Any]:
    return load_manifest(CPU_EXAMPLE)


@pytest.fixture(scope="module")
def h200() -> dict[str, Any]:
    return load_manifest(H200_EXAMPLE)


def _categories(a: dict[str, Any], b: dict[str, Any]) -> dict[str, str]:
    return {d.path: d.category for d in diff_manifests(a, b).differences}


def test_examples_are_labelled(cpu: dict[str, Any], h200: dict[str, Any]) -> None:
    assert cpu["capture"]["source"] == "captured" and cpu["gpus"] == []
    assert h200["capture"]["source"] == "synthesized-from-fixture"
    assert h200["gpus"][0]["name"] == "NVIDIA H200"


def test_cpu_vs_h200_categories(cpu: dict[str, Any], h200: dict[str, Any]) -> None:
    diff = diff_manifests(cpu, h200)
    categories = {d.path: d.category for d in diff.differences}
    assert diff.has_numerics
    for path in ("gpus", "gpu_system.driver_version", "gpu_system.cuda_driver_version"):
        assert categories[path] == NUMERICS
    for path in ("host.hostname", "capture.created_at", "capture.source"):
        assert categories[path] == OTHER
    assert not any(p.startswith(("model", "data", "scorer", "software")) for p in categories)
    row = next(d for d in diff.differences if d.path == "gpus")
    assert row.a == [] and row.b[0]["name"] == "NVIDIA H200"


def test_identical_manifests_have_no_differences(cpu: dict[str, Any]) -> None:
    diff = diff_manifests(cpu, copy.deepcopy(cpu))
    assert diff.differences == () and not diff.has_numerics
    assert format_diff(diff) == "No differences.\n"


def test_every_example_field_has_an_explicit_rule(cpu: dict[str, Any], h200: dict[str, Any]) -> None:
    for manifest in (cpu, h200):
        nodes, leaves = _paths(manifest)
        for path in [*leaves, "gpus[0]", "model", "data.prompts", "software.image"]:
            assert classify(path)[1] != _UNCLASSIFIED, path


def test_software_model_and_data_changes_are_numerics(cpu: dict[str, Any]) -> None:
    other = copy.deepcopy(cpu)
    other["software"]["packages"]["torch"]["version"] = "2.9.1+cu128"
    other["software"]["torch_build"]["cuda"] = "12.8"
    other["software"]["distributions"]["nvidia-cublas-cu12"] = "12.8.4.1"
    other["software"]["distributions"]["rich"] = "99.0"
    other["software"]["distributions"]["torch"] = "2.9.1+cu128"  # reported under packages, not twice
    other["numerics"]["env"]["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    other["numerics"]["extra"] = {"dtype": "float32", "attention_implementation": "eager"}
    first_file = next(iter(other["model"]["files"]))
    other["model"]["files"][first_file] = "0" * 64
    other["model"]["path"] = "/elsewhere"
    other["data"]["prompts"]["sha256"] = "1" * 64
    other["data"]["prompts"]["path"] = "/elsewhere/p.jsonl"
    categories = _categories(cpu, other)
    for path in (
        "software.packages.torch.version",
        "software.torch_build.cuda",
        "software.distributions.nvidia-cublas-cu12",
        "numerics.env.CUBLAS_WORKSPACE_CONFIG",
        "numerics.extra.dtype",
        f"model.files.{first_file}",
        "data.prompts.sha256",
    ):
        assert categories[path] == NUMERICS, path
    for path in ("software.distributions.rich", "model.path", "data.prompts.path"):
        assert categories[path] == OTHER, path
    assert "software.distributions.torch" not in categories


def test_gpu_clocks_other_gpu_model_numerics(h200: dict[str, Any]) -> None:
    other = copy.deepcopy(h200)
    gpu = other["gpus"][0]
    gpu["clocks_mhz"]["sm_current"] = 1980
    gpu["uuid_sha256"] = "2" * 64
    gpu["ecc_mode"]["current"] = False
    categories = _categories(h200, other)
    assert set(categories.values()) == {OTHER}
    gpu.update(name="NVIDIA H100 80GB HBM3", memory_total_bytes=81559 * 2**20)
    other["gpu_system"]["driver_version"] = "550.54.15"
    categories = _categories(h200, other)
    assert categories["gpus[0].name"] == NUMERICS
    assert categories["gpus[0].memory_total_bytes"] == NUMERICS
    assert categories["gpu_system.driver_version"] == NUMERICS


def test_cpu_isa_matters_only_when_a_side_runs_on_cpu(cpu: dict[str, Any], h200: dict[str, Any]) -> None:
    def with_avx512(manifest: dict[str, Any]) -> dict[str, Any]:
        changed = copy.deepcopy(manifest)
        changed["host"]["cpu"]["isa"]["avx512f"] = not changed["host"]["cpu"]["isa"]["avx512f"]
        return changed

    assert _categories(cpu, with_avx512(cpu))["host.cpu.isa.avx512f"] == NUMERICS
    assert _categories(h200, with_avx512(h200))["host.cpu.isa.avx512f"] == OTHER


def test_cli_diff_table_json_and_fail_on(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["manifest", "diff", str(CPU_EXAMPLE), str(H200_EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "CAN CHANGE NUMERICS" in result.output and "CANNOT CHANGE NUMERICS" in result.output
    assert "NVIDIA H200" in result.output

    result = runner.invoke(cli, ["manifest", "diff", str(CPU_EXAMPLE), str(H200_EXAMPLE), "--json"])
    payload = json.loads(result.stdout)
    assert payload["numerics_relevant"] is True
    assert payload["trust"]["a"].startswith("a manifest file, not verified")
    assert "gpu_system.driver_version" in {row["path"] for row in payload["numerics"]}

    result = runner.invoke(
        cli, ["manifest", "diff", str(CPU_EXAMPLE), str(H200_EXAMPLE), "--fail-on", "numerics"]
    )
    assert result.exit_code == 1


def test_cli_diff_refuses_unsigned_run_directories(tmp_path: Path) -> None:
    """A run directory's manifest is diffed only once its run verifies (tests/unit/test_forgery_checkers);
    an unsigned one is refused, its manifest file diffed as a plain file."""
    for name in ("run-a", "run-b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MANIFEST).write_bytes(CPU_EXAMPLE.read_bytes())
    runs = [str(tmp_path / "run-a"), str(tmp_path / "run-b")]
    refused = CliRunner().invoke(cli, ["manifest", "diff", *runs])
    assert refused.exit_code == 3 and "not signed" in refused.stderr
    files = [str(Path(run) / MANIFEST) for run in runs]
    result = CliRunner().invoke(cli, ["manifest", "diff", *files, "--fail-on", "numerics"])
    assert result.exit_code == 0 and "No differences." in result.stdout and "not verified" in result.stderr


def test_cli_diff_rejects_bad_manifest(tmp_path: Path) -> None:
    broken = json.loads(CPU_EXAMPLE.read_text())
    del broken["host"]["cpu"]["model"]
    (tmp_path / "bad.json").write_text(json.dumps(broken))
    result = CliRunner().invoke(cli, ["manifest", "diff", str(tmp_path / "bad.json"), str(CPU_EXAMPLE)])
    assert result.exit_code == 2
    assert "field 'host.cpu.model'" in result.output


def test_cli_manifest_writes_a_valid_file(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    result = CliRunner().invoke(cli, ["manifest", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert load_manifest(out)["capture"]["source"] == "captured"

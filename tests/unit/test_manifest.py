"""Manifests: the real one validates and holds this machine's CPU and packages; load/write/validate."""

from __future__ import annotations

import copy
import importlib.metadata as metadata
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from capsule.artifacts.embedded_model import MODEL_RECORD, hash_model_files, tree_digest
from capsule.errors import BadInputError, VerificationError
from capsule.machine.host import parse_cpuinfo
from capsule.machine.manifest import (
    SCHEMA_VERSION,
    build_manifest,
    load_manifest,
    manifest_digest,
    validate_manifest,
    write_manifest,
)
from capsule.machine.numerics import REDACTED, numerics_env, probe_numerics, torch_runtime
from capsule.run_dir import MANIFEST


@pytest.fixture(scope="module")
def real_manifest() -> dict[str, Any]:
    """A manifest of this machine, without model or prompts (built once: about 0.3 s)."""
    return build_manifest(model_dir=None, prompts_path=None)


def test_real_manifest_validates(real_manifest: dict[str, Any]) -> None:
    validate_manifest(real_manifest)
    assert real_manifest["schema_version"] == SCHEMA_VERSION
    assert real_manifest["capture"]["source"] == "captured"
    assert isinstance(real_manifest["capture"]["elapsed_s"], float)
    json.dumps(real_manifest)  # plain JSON all the way down


def test_real_manifest_has_this_cpu(real_manifest: dict[str, Any]) -> None:
    cpu = real_manifest["host"]["cpu"]
    expected = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert cpu["model"] == expected["model"] and cpu["model"]
    assert cpu["usable_cores"] == len(os.sched_getaffinity(0))
    assert cpu["logical_cores"] == os.cpu_count()
    assert cpu["isa"]["avx2"] == ("avx2" in expected["flags"])
    assert real_manifest["host"]["memory"]["total_bytes"] > 0


def test_real_manifest_has_installed_versions(real_manifest: dict[str, Any]) -> None:
    packages = real_manifest["software"]["packages"]
    for key in ("torch", "transformers", "tokenizers", "nltk", "langdetect"):
        assert packages[key]["version"] == metadata.version(key)
    vllm = packages["vllm"]
    assert vllm is not None and vllm["version"] == metadata.version(vllm["distribution"])
    build = real_manifest["software"]["torch_build"]
    assert build["version"] == metadata.version("torch")
    assert real_manifest["software"]["distributions"]["click"] == metadata.version("click")
    assert real_manifest["software"]["python"] == sys.version.split()[0]


def test_real_manifest_gpu_absent_cleanly(real_manifest: dict[str, Any]) -> None:
    if real_manifest["gpu_system"]["nvml"] == "ok":
        pytest.skip("NVML present here; the no-GPU path is covered by the fixture tests")
    assert real_manifest["gpus"] == []
    assert "NVML" in real_manifest["gpu_system"]["reason"]


def test_scorer_files_hashed(real_manifest: dict[str, Any]) -> None:
    scorer = real_manifest["scorer"]
    assert scorer["package"] == "ifeval_scorer"
    assert all(name.endswith(".py") for name in scorer["files"])
    assert len(scorer["source_digest"]) == 64


def _model_dir(tmp_path: Path, *, with_record: bool = True) -> Path:
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text('{"a": 1}')
    (directory / "model.safetensors").write_bytes(b"\x00weights")
    if with_record:
        files = hash_model_files(directory)
        record = {
            "name": "tiny",
            "source": {"kind": "test"},
            "files": files,
            "tree_digest": tree_digest(files),
        }
        (directory / MODEL_RECORD).write_text(json.dumps(record))
    return directory


def test_model_and_prompts_fingerprinted(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"key": 1}\n')
    manifest = build_manifest(
        model_dir=_model_dir(tmp_path),
        prompts_path=prompts,
        extra_numerics={"dtype": "bfloat16", "attention_implementation": "sdpa", "where": tmp_path},
    )
    assert set(manifest["model"]["files"]) == {"config.json", "model.safetensors"}
    assert manifest["model"]["source"] == {"kind": "test"}
    assert manifest["data"]["prompts"]["pinned_ifeval"] is False
    assert manifest["numerics"]["extra"]["dtype"] == "bfloat16"
    assert manifest["numerics"]["extra"]["where"] == str(tmp_path)  # non-JSON values recorded as text


def test_model_without_record_is_hashed(tmp_path: Path) -> None:
    manifest = build_manifest(model_dir=_model_dir(tmp_path, with_record=False), prompts_path=None)
    assert manifest["model"]["source"]["kind"] == "directory"
    assert len(manifest["model"]["files"]) == 2


def test_model_record_with_wrong_tree_digest_rejected(tmp_path: Path) -> None:
    directory = _model_dir(tmp_path)
    record = json.loads((directory / MODEL_RECORD).read_text())
    record["tree_digest"] = "0" * 64
    (directory / MODEL_RECORD).write_text(json.dumps(record))
    with pytest.raises(VerificationError, match="tree_digest"):
        build_manifest(model_dir=directory, prompts_path=None)


def test_numerics_env_selects_and_redacts() -> None:
    env = {
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "VLLM_CPU_KVCACHE_SPACE": "4",
        "VLLM_API_KEY": "s3cret",
        "OMP_NUM_THREADS": "2",
        "HOME": "/root",
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    chosen = numerics_env(env)
    assert chosen == {
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUDA_VISIBLE_DEVICES": "0",
        "OMP_NUM_THREADS": "2",
        "VLLM_API_KEY": REDACTED,
        "VLLM_CPU_KVCACHE_SPACE": "4",
    }


def test_torch_flags_not_invented_when_torch_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    torch_section = probe_numerics()["torch"]
    assert torch_section["recorded"] is False and "not imported" in torch_section["reason"]


def test_torch_runtime_reads_flags_from_a_torch_like_object() -> None:
    def on() -> bool:
        return True

    matmul = SimpleNamespace(
        allow_tf32=False,
        fp32_precision="ieee",
        allow_bf16_reduced_precision_reduction=True,
        allow_fp16_reduced_precision_reduction=True,
    )
    cuda = SimpleNamespace(
        matmul=matmul, flash_sdp_enabled=on, mem_efficient_sdp_enabled=on, math_sdp_enabled=on
    )  # cudnn_sdp_enabled missing: recorded as null
    fake = SimpleNamespace(
        backends=SimpleNamespace(
            cuda=cuda,
            cudnn=SimpleNamespace(allow_tf32=True, deterministic=False, benchmark=False),
            cpu=SimpleNamespace(get_cpu_capability=lambda: "AVX2"),
        ),
        get_float32_matmul_precision=lambda: "highest",
        are_deterministic_algorithms_enabled=lambda: True,
        is_deterministic_algorithms_warn_only_enabled=lambda: False,
        get_num_threads=lambda: 2,
        get_num_interop_threads=lambda: 2,
        cuda=SimpleNamespace(is_available=lambda: False),
    )
    runtime = torch_runtime(fake)
    assert runtime["matmul_allow_tf32"] is False and runtime["deterministic_algorithms"] is True
    assert runtime["sdpa_backends_enabled"] == {
        "flash": True,
        "mem_efficient": True,
        "math": True,
        "cudnn": None,
    }
    assert runtime["num_threads"] == 2 and runtime["cpu_capability"] == "AVX2"


def test_write_then_load_round_trip_and_digest(tmp_path: Path, real_manifest: dict[str, Any]) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    digest = write_manifest(run_dir, real_manifest)
    assert (run_dir / MANIFEST).is_file()
    assert digest == manifest_digest(real_manifest) == manifest_digest(load_manifest(run_dir))
    assert load_manifest(run_dir / MANIFEST) == real_manifest


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda m: m.update(schema_version=3), "schema_version"),
        (lambda m: m.pop("schema_version"), "schema_version"),
        (lambda m: m.pop("gpus"), "gpus"),
        (lambda m: m["host"]["cpu"].pop("model"), "host.cpu.model"),
        (lambda m: m["software"]["packages"].pop("torch"), "software.packages.torch"),
        (lambda m: m["host"]["cpu"].update(flags_sha256="xyz"), "host.cpu.flags_sha256"),
        (lambda m: m["gpu_system"].update(device_count="one"), "gpu_system.device_count"),
    ],
)
def test_bad_manifest_rejected_naming_the_field(
    tmp_path: Path, real_manifest: dict[str, Any], mutate: Any, field: str
) -> None:
    broken = copy.deepcopy(real_manifest)
    mutate(broken)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(BadInputError, match=f"field '{field}'"):
        load_manifest(path)


def test_load_errors_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not found"):
        load_manifest(tmp_path)  # a directory without manifest.json
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(BadInputError, match="not valid JSON"):
        load_manifest(tmp_path / "x.json")


def test_cli_manifest_stays_light(tmp_path: Path) -> None:
    """`capsule manifest` fingerprints torch, transformers and vLLM without importing them (their
    import alone takes seconds); its speed is measured in benchmarks/manifest_speed.py."""
    import subprocess

    out = tmp_path / "m.json"
    script = (
        "import sys\n"
        "from capsule.cli import cli\n"
        f"try:\n    cli.main(['manifest', '--out', {str(out)!r}], prog_name='capsule')\n"
        "except SystemExit as stop:\n    assert not stop.code, stop.code\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'vllm', 'matplotlib') if m in sys.modules)\n"
        "print('heavy:', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == "heavy: []", result.stdout + result.stderr
    load_manifest(out)

"""`--lanes 2` on the embedded model for real: the embedded plan's fp32 vLLM and transformers arms,
shrunk to 2 prompts x 8 tokens (`benchmarks/lanes.py`'s shrinking), generated sequentially and on
two lane processes; every row is the same apart from its timing, and each laned arm records the
lane and device it ran on. Slow (two vLLM-CPU engine starts); run under the heavy-command lock."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]
ARMS = ["vllm-fp32-b48", "vllm-fp32-b48-rerun", "hf-fp32-b16"]  # two engine runs: one per lane


def _benchmark(repo_root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("lanes_benchmark", repo_root / "benchmarks" / "lanes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_two_lanes_generate_the_sequential_rows(
    repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompts_path: Path,
    embedded_model_dir: Path,
) -> None:
    from capsule.pipeline.stage_generate import GenerateInputs
    from capsule.prereg.loader import load_plan
    from ifeval_scorer import load_prompts

    monkeypatch.chdir(repo_root)
    bench = _benchmark(repo_root)
    plan = bench.shrunk_plan(load_plan(repo_root / "prereg" / "smollm2-135m-v3"), ARMS, 2, 8)
    inputs = GenerateInputs(load_prompts(prompts_path), embedded_model_dir, "lanes-test", "")
    bench.timed_generation(plan, inputs, tmp_path / "sequential", 1)
    bench.timed_generation(plan, inputs, tmp_path / "lanes", 2)
    one, two = bench.generation_rows(tmp_path / "sequential"), bench.generation_rows(tmp_path / "lanes")
    assert sorted(one) == sorted(ARMS) and all(len(rows) == 2 for rows in one.values())
    assert two == one
    lanes = {}
    for arm in ARMS:
        meta = json.loads((tmp_path / "lanes" / "generations" / f"{arm}.meta.json").read_text())
        assert meta["status"] == "complete" and meta["device"] == "cpu"
        lanes[arm] = meta["lane"]
    assert lanes["vllm-fp32-b48"] == lanes["vllm-fp32-b48-rerun"] != lanes["hf-fp32-b16"]

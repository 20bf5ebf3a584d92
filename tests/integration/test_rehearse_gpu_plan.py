"""`capsule reproduce --plan <the GPU plan> --rehearse` end to end on this CPU (slow): every arm on its
real backend (transformers on the Qwen3.5 stand-in, vLLM-CPU and the launched server with the authors'
64 clients on the declared substitute), the batch-invariant arms recorded as refused, every control,
verdict and report, and a bundle that verifies; nothing in the ledger, nothing in results/.

It runs on a copy of prereg/ in a temporary repository root. The arms are as small as
`capsule.artifacts.stand_in_shapes.REHEARSAL_SIZE` declares (2 prompts, 16 tokens), on two lanes
(`--lanes 2`, as a GPU host would run the study): most of its time is vLLM starting an engine per
engine run, so its offline engines are built in the lane's own process (`offline_vllm_env`, 8.6 s a
start instead of 21.4 s; this test alone 178.8 s before and 69.6 s after, 2-core AMD EPYC Zen 4
with AVX-512 and avx512_bf16, benchmarks/README.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.artifacts.stand_in_shapes import QWEN3_5, QWEN3_NEXT, REHEARSAL_SIZE, VLLM_BACKENDS
from capsule.cli import cli
from capsule.evidence.verify import verify_run
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.loader import load_plan

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

PLANS = ("prereg/agents-a1-4b-v3", "prereg/agents-a1-4b-v2")  # the newest GPU plan there is


def test_gpu_plan_rehearses_end_to_end(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       record_property: object) -> None:
    pytest.importorskip("vllm")
    pytest.importorskip(
        "capsule.generation.refused_arms",
        reason="the batch-invariant arms need issue 27 item 2 (a refused arm is a result, not a crash)",
    )
    plan_dir = next(p for p in PLANS if (repo_root / p / "plan.toml").exists())
    shutil.copytree(repo_root / "prereg", tmp_path / "prereg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
    ledger = (tmp_path / "prereg" / "ledger.jsonl").read_bytes()
    plan = load_plan(tmp_path / plan_dir)

    result = CliRunner().invoke(
        cli, ["reproduce", "--plan", plan_dir, "--rehearse", "--no-progress", "--lanes", "2"]
    )

    assert result.exit_code == 0, result.output + result.stderr
    assert "REHEARSAL" in result.stderr and result.stdout.splitlines()[-1].startswith("REHEARSAL")
    assert (tmp_path / "prereg" / "ledger.jsonl").read_bytes() == ledger
    assert not (tmp_path / "results").exists()
    (run,) = (tmp_path / "runs" / "rehearsal" / plan.name).iterdir()
    generations = run / "generations"
    refused = {p.name.split(".")[0] for p in generations.glob("*.refused.json")}
    # refused here: the batch-invariant arms (vLLM-CPU) and an arm pinned to a CUDA device (none here)
    invariant = {arm.name for arm in plan.arms if arm.env.get("VLLM_BATCH_INVARIANT") == "1"}
    on_cuda = {arm.name for arm in plan.arms if str(arm.backend_options.get("device", "")).startswith("cuda")}
    assert invariant and refused == invariant | on_cuda
    timings = {}
    for arm in plan.arms:
        if arm.name in refused:
            continue
        meta = json.loads((generations / f"{arm.name}.meta.json").read_text())
        rows = [json.loads(line) for line in (generations / f"{arm.name}.jsonl").read_text().splitlines()]
        assert meta["status"] == "complete" and len(rows) == REHEARSAL_SIZE.prompts_per_arm, arm.name
        assert meta["lane"] in (1, 2) and meta["device"] == "cpu", arm.name
        assert all(r["n_output_tokens"] <= REHEARSAL_SIZE.max_new_tokens for r in rows), arm.name
        substitute = arm.backend in VLLM_BACKENDS
        assert meta["backend"]["loader"] == (QWEN3_NEXT if substitute else QWEN3_5).loader, arm.name
        timings[arm.name] = meta.get("elapsed_s")
    record_property("arm_elapsed_s", json.dumps(timings))
    record = json.loads((run / "rehearsal.json").read_text())
    assert set(record["arms"]) == {arm.name for arm in plan.arms}
    in_process = REHEARSAL_SIZE.offline_vllm_env  # what the rehearsal adds to offline vLLM arms
    for arm in plan.arms:
        offline_vllm = SPECS[arm.backend].on_vllm and not SPECS[arm.backend].launched
        expected = {k: {"plan": None, "rehearsal": v} for k, v in in_process.items()} if offline_vllm else {}
        assert record["arms"][arm.name]["env_changed"] == expected, arm.name
        if offline_vllm and arm.name not in refused:  # the engine was built so, and its sidecar says so
            meta = json.loads((generations / f"{arm.name}.meta.json").read_text())
            assert meta["backend"]["env"].items() >= in_process.items(), arm.name
    assert record["stand_in"]["vllm_substitute_why"]
    analysis = json.loads((run / "analysis.json").read_text())
    reported = set(analysis["controls"]) | set(analysis.get("skipped_controls", []))
    assert reported >= {c.name for c in plan.controls}
    results_md = (run / "RESULTS.md").read_text()
    assert "**REHEARSAL: STAND-IN MODEL.**" in results_md.split("\n\n")[1]
    summary = verify_run(run, pubkey=None, ledger_path=None)  # signature and every file; no ledger entry
    assert summary.n_files > len(plan.arms)

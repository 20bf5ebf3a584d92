"""An arm run against a given endpoint (`--endpoint`) records only what applies to an endpoint: its
client options, no vLLM engine option (`enforce_eager`, ...) and no env (`VLLM_CPU_*`): the server was
started by someone else, with settings the capsule cannot know (its describe() says they are unknown)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from arm_builder import build_arm
from click.testing import CliRunner
from openai_fake import MODEL_ID, fake_openai

from capsule.cli import cli
from capsule.generation.arm_runner import generate_arm
from capsule.generation.backends.fake import FakeChatTokenizer
from ifeval_scorer import Prompt

PROMPTS = {3000 + i: Prompt(3000 + i, f"prompt {i}", ("x",), ({},)) for i in range(3)}
ENGINE_ONLY = {"enforce_eager": True, "gpu_memory_utilization": 0.5}
CPU_ENV = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def _meta(out: Path, arm: str) -> dict[str, Any]:
    return json.loads((out / "generations" / f"{arm}.meta.json").read_text())


def test_a_plan_arm_against_an_endpoint_records_its_client_options_only(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": 0}))
    arm = build_arm(name="srv", backend="server", batch_size=2, max_new_tokens=6, env=CPU_ENV,
                    backend_options={"concurrency": 2, "model_id": MODEL_ID, **ENGINE_ONLY})  # fmt: skip
    with fake_openai() as fake:
        result = generate_arm(
            arm, prompts=PROMPTS, keys=list(PROMPTS), model_dir=model_dir, out_dir=tmp_path / "run",
            plan_hash="p" * 64, manifest_digest="m" * 64, progress=False, tokenizer=FakeChatTokenizer(),
            endpoint=fake.url,
        )  # fmt: skip
    assert result.complete
    meta = _meta(tmp_path / "run", "srv")
    for recorded in (meta["arm"], meta["identity"]["settings"]):
        assert recorded["backend_options"] == {"concurrency": 2, "model_id": MODEL_ID}
        assert recorded["env"] == {}
    assert meta["backend"]["mode"] == "endpoint" and "env" not in meta["backend"]["server"]
    assert "enforce_eager" not in json.dumps(meta) and "VLLM_CPU" not in json.dumps(meta)


def test_an_adhoc_endpoint_arm_records_no_engine_setting(tmp_path: Path, embedded_model_dir: Path) -> None:
    """`capsule generate --backend server --endpoint URL`: the ad-hoc server arm would launch with
    enforce_eager and VLLM_CPU_NUM_OF_RESERVED_CPU=0; against an endpoint neither is recorded."""
    out = tmp_path / "run"
    with fake_openai() as fake:
        result = CliRunner().invoke(cli, [
            "generate", "--backend", "server", "--endpoint", fake.url, "--model-dir", str(embedded_model_dir),
            "--first", "2", "--max-new-tokens", "4", "--batch-size", "2", "--out", str(out), "--no-progress",
        ])  # fmt: skip
    assert result.exit_code == 0, result.output
    adhoc = json.loads((out / "adhoc.json").read_text())["arm"]
    assert adhoc["backend_options"] == {"concurrency": 16} and adhoc["env"] == {}
    meta = _meta(out, "adhoc")
    assert meta["arm"]["backend_options"] == {"concurrency": 16} and meta["arm"]["env"] == {}

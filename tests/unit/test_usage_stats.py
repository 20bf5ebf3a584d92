"""Every vLLM engine or server the capsule starts runs with usage statistics off, recorded in the arm's
env, unless the plan opts in (`usage_stats = true`).

The offline engine is a stand-in for `vllm.LLM` that notes the environment it was built in (vLLM's
engine process inherits it); the launched server is a real child process (the fake endpoint, started
in place of vLLM's api_server) that writes the environment it was given before it serves.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from arm_builder import build_arm
from openai_fake import MODEL_ID

from capsule.generation.backends import BackendContext
from capsule.generation.backends import server as server_module
from capsule.generation.backends.arm_env import USAGE_STATS_OFF
from capsule.generation.backends.server import ServerBackend
from capsule.prereg.adhoc import parse_arm_table
from capsule.run_dir import RunDir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    directory.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "eos_token_id": 2}
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "generation_config.json").write_text('{"eos_token_id": 2}')
    return directory


@pytest.fixture(autouse=True)
def no_usage_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in USAGE_STATS_OFF:
        monkeypatch.delenv(name, raising=False)


class _Engine:
    """Stands in for `vllm.LLM`: keeps its arguments and the usage variables in force when built."""

    built: list[tuple[dict[str, Any], dict[str, str | None]]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.built.append((kwargs, {name: os.environ.get(name) for name in USAGE_STATS_OFF}))
        ns = types.SimpleNamespace
        config = ns(
            scheduler_config=ns(), cache_config=ns(),
            model_config=ns(enforce_eager=True, max_model_len=64, seed=kwargs["seed"]),
            compilation_config=ns(mode=None), device_config=ns(device_type="cpu"),
        )  # fmt: skip
        self.llm_engine = ns(vllm_config=config, engine_core=ns(shutdown=lambda timeout=None: None))


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], dict[str, str | None]]]:
    module = types.ModuleType("vllm")
    module.LLM = _Engine  # type: ignore[attr-defined]
    module.__version__ = "stand-in"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    _Engine.built = []
    return _Engine.built


def test_an_offline_vllm_engine_starts_with_usage_statistics_off(
    model_dir: Path, fake_vllm: list[tuple[dict[str, Any], dict[str, str | None]]]
) -> None:
    from capsule.generation.backends.vllm import VLLMBackend

    backend = VLLMBackend(model_dir, build_arm(backend="vllm", backend_options={"enforce_eager": True}))
    kwargs, usage = fake_vllm[0]
    assert usage == USAGE_STATS_OFF and "usage_stats" not in kwargs  # an env switch, no engine argument
    described = backend.describe()
    assert {k: described["env"][k] for k in USAGE_STATS_OFF} == USAGE_STATS_OFF
    backend.close()
    assert not set(USAGE_STATS_OFF) & set(os.environ)  # restored with the arm's env
    opted = build_arm(backend="vllm", backend_options={"enforce_eager": True, "usage_stats": True})
    VLLMBackend(model_dir, opted).close()
    assert fake_vllm[1][1] == {name: None for name in USAGE_STATS_OFF}


def _env_dumping_server(env_file: Path) -> Any:
    """A launch command: the fake endpoint, which first writes the environment it was started with."""

    def command(model_dir: Path, dtype: str, batch: int, port: int, engine: dict[str, Any]) -> list[str]:
        assert "usage_stats" not in engine  # never a command-line flag of vLLM's server
        code = (
            f"import json, os, sys; sys.path[:0] = [{str(ROOT)!r}, {str(HERE)!r}]; "
            f"open({str(env_file)!r}, 'w').write(json.dumps(dict(os.environ))); "
            f"from openai_fake import Faults, serve_forever; serve_forever({port}, Faults())"
        )
        return [sys.executable, "-c", code]

    return command


@pytest.mark.parametrize("opt_in", [False, True])
def test_a_launched_vllm_server_starts_with_usage_statistics_off(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch, opt_in: bool
) -> None:
    env_file = tmp_path / "server-env.json"
    monkeypatch.setattr(server_module, "launch_command", _env_dumping_server(env_file))
    options: dict[str, Any] = {"concurrency": 1, "enforce_eager": True, "model_id": MODEL_ID}
    if opt_in:
        options["usage_stats"] = True
    arm = build_arm(name="srv", backend="server", batch_size=1, backend_options=options,
                    env={"OMP_NUM_THREADS": "2"})  # fmt: skip
    run = RunDir(tmp_path / "run")
    backend = ServerBackend(model_dir, arm, context=BackendContext(run=run))
    try:
        seen = json.loads(env_file.read_text())
        described = backend.describe()["server"]["env"]
    finally:
        backend.close()
    launched = json.loads(run.server_command("srv.1").read_text())["env"]
    expected = {} if opt_in else USAGE_STATS_OFF
    assert {k: seen[k] for k in USAGE_STATS_OFF if k in seen} == expected and seen["OMP_NUM_THREADS"] == "2"
    assert described == launched == {**expected, "OMP_NUM_THREADS": "2"}


def test_a_plan_declares_the_opt_in() -> None:
    table = {
        "name": "a", "backend": "vllm", "subset": "all", "dtype": "float32", "batch_size": 1,
        "batch_order": "file", "seed": 0, "max_new_tokens": 4, "thinking": "off", "unclosed": "empty",
        "decoding": {"mode": "greedy", "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                     "presence_penalty": 0.0, "repetition_penalty": 1.0},
        "backend_options": {"enforce_eager": True, "usage_stats": True}, "env": {},
    }  # fmt: skip
    assert parse_arm_table(table, "plan.toml").backend_options["usage_stats"] is True
    with pytest.raises(Exception, match="'usage_stats' must be a bool"):
        options = {"enforce_eager": True, "usage_stats": "yes"}
        parse_arm_table({**table, "backend_options": options}, "plan.toml")

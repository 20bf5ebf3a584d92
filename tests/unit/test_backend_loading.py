"""What a backend loads with: the plan's [model] loader (checked against config.json) and, for vLLM,
one engine seed for every arm, recorded. No model and no vLLM needed: stand-ins take their place."""

from __future__ import annotations

import json
import logging
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from arm_builder import build_arm

from capsule.errors import BadInputError
from capsule.generation.arm_runner import generate_arm
from capsule.generation.backends import reuse_key
from capsule.generation.backends.checkpoint import checkpoint_loader, resolve_loader
from capsule.generation.backends.fake import FakeChatTokenizer
from capsule.prereg.loader import load_plan
from ifeval_scorer import Prompt

QWEN = "Qwen3_5ForConditionalGeneration"


def checkpoint(directory: Path, *architectures: str) -> Path:
    """A model directory holding only a config.json (architectures, eos) and a generation config."""
    directory.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"eos_token_id": 2}
    if architectures:
        config["architectures"] = list(architectures)
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "generation_config.json").write_text('{"eos_token_id": [2, 3], "pad_token_id": 0}')
    return directory


def test_the_checkpoint_says_which_loader_it_needs(tmp_path: Path) -> None:
    assert checkpoint_loader(checkpoint(tmp_path / "q", QWEN)) == "image_text_to_text"
    assert checkpoint_loader(checkpoint(tmp_path / "l", "LlamaForCausalLM")) == "causal_lm"
    assert checkpoint_loader(checkpoint(tmp_path / "none")) is None
    assert checkpoint_loader(tmp_path / "missing") is None


def test_resolve_loader(tmp_path: Path) -> None:
    qwen, bare = checkpoint(tmp_path / "q", QWEN), checkpoint(tmp_path / "bare")
    assert resolve_loader(qwen, "image_text_to_text") == "image_text_to_text"
    assert resolve_loader(bare, "image_text_to_text") == "image_text_to_text"  # config.json silent: the plan
    assert resolve_loader(qwen, None) == "image_text_to_text"  # no plan: the checkpoint's
    assert resolve_loader(bare, None) == "causal_lm"
    with pytest.raises(BadInputError) as caught:
        resolve_loader(qwen, "causal_lm")
    message = str(caught.value)
    assert "[model] loader is 'causal_lm'" in message and QWEN in message
    assert "needs loader 'image_text_to_text'" in message


class _Recorder:
    """Stands in for a transformers auto class: records which one `from_pretrained` was called on."""

    calls: list[str] = []

    def __init__(self, label: str) -> None:
        self.label = label

    def from_pretrained(self, path: str, **kwargs: Any) -> Any:
        self.calls.append(self.label)
        model = types.SimpleNamespace(device="cpu", eval=lambda: None, to=lambda device: None)
        return model


@pytest.fixture
def auto_classes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import transformers

    _Recorder.calls = []
    for label in ("AutoModelForCausalLM", "AutoModelForImageTextToText"):
        monkeypatch.setattr(transformers, label, _Recorder(label))
    return _Recorder.calls


def test_hf_loads_the_class_the_plan_names(tmp_path: Path, auto_classes: list[str]) -> None:
    from capsule.generation.backends.hf import HFBackend

    arm = build_arm(backend="hf")
    HFBackend(checkpoint(tmp_path / "q", QWEN), arm, "image_text_to_text")
    backend = HFBackend(checkpoint(tmp_path / "bare"), arm, "image_text_to_text")  # config.json silent
    HFBackend(checkpoint(tmp_path / "l", "LlamaForCausalLM"), arm, "causal_lm")
    assert auto_classes == [
        "AutoModelForImageTextToText",
        "AutoModelForImageTextToText",
        "AutoModelForCausalLM",
    ]
    assert backend.describe()["loader"] == "image_text_to_text"


def test_hf_refuses_a_loader_the_checkpoint_contradicts(tmp_path: Path, auto_classes: list[str]) -> None:
    from capsule.generation.backends.hf import HFBackend

    with pytest.raises(BadInputError, match=rf"\[model\] loader is 'causal_lm'.*{QWEN}"):
        HFBackend(checkpoint(tmp_path / "q", QWEN), build_arm(backend="hf"), "causal_lm")
    assert auto_classes == []  # refused before any weights load


class _Engine:
    """Stands in for `vllm.LLM`: keeps the keyword arguments and exposes a resolved config."""

    built: list[dict[str, Any]] = []
    logging_env: list[tuple[str | None, str | None]] = []  # vLLM's logging variables when each was built
    shutdowns: list[float | None] = []  # the grace each engine was closed with

    def __init__(self, **kwargs: Any) -> None:
        self.built.append(kwargs)
        self.logging_env.append((os.environ.get("VLLM_LOGGING_LEVEL"), os.environ.get("VLLM_LOGGING_STREAM")))
        ns = types.SimpleNamespace
        config = ns(
            scheduler_config=ns(max_num_seqs=kwargs["max_num_seqs"]),
            cache_config=ns(),
            model_config=ns(
                enforce_eager=kwargs.get("enforce_eager", False), max_model_len=64, seed=kwargs["seed"]
            ),
            compilation_config=ns(mode=None),
            device_config=ns(device_type="cpu"),
        )
        close = ns(shutdown=lambda timeout=None: self.shutdowns.append(timeout))
        self.llm_engine = ns(vllm_config=config, engine_core=close)


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    module = types.ModuleType("vllm")
    module.LLM = _Engine  # type: ignore[attr-defined]
    module.__version__ = "stand-in"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    _Engine.built, _Engine.logging_env, _Engine.shutdowns = [], [], []
    return _Engine.built


def test_vllm_engine_seed_is_one_value_for_every_arm_and_recorded(
    tmp_path: Path, repo_root: Path, fake_vllm: list[dict[str, Any]]
) -> None:
    """smollm2-135m-v2's sample-s1-b48 and sample-s2-b48 share an engine (equal reuse keys); the
    engine seed must not depend on which of them built it, and each arm's describe() must say it."""
    from capsule.generation.backends.vllm import VLLMBackend

    plan = load_plan(repo_root / "prereg" / "smollm2-135m-v2")
    s1, s2 = plan.arm("sample-s1-b48"), plan.arm("sample-s2-b48")
    assert s1.seed != s2.seed and reuse_key(s1) == reuse_key(s2)
    model = checkpoint(tmp_path / "m", "LlamaForCausalLM")
    described = [VLLMBackend(model, arm, plan.model.loader).describe() for arm in (s1, s2)]
    assert fake_vllm[0]["seed"] == fake_vllm[1]["seed"]
    assert [d["engine_seed"] for d in described] == [fake_vllm[0]["seed"]] * 2
    assert [d["loader"] for d in described] == ["causal_lm", "causal_lm"]


def test_vllm_refuses_a_loader_the_checkpoint_contradicts(
    tmp_path: Path, fake_vllm: list[dict[str, Any]]
) -> None:
    from capsule.generation.backends.vllm import VLLMBackend

    arm = build_arm(backend="vllm", backend_options={"enforce_eager": True})
    with pytest.raises(BadInputError, match=r"\[model\] loader is 'image_text_to_text'.*LlamaForCausalLM"):
        VLLMBackend(checkpoint(tmp_path / "m", "LlamaForCausalLM"), arm, "image_text_to_text")
    assert fake_vllm == []  # refused before the engine is built


def test_generate_arm_hands_the_plan_loader_to_the_backend(tmp_path: Path) -> None:
    prompts = {k: Prompt(k, f"prompt {k}", ("x",), ({},)) for k in range(3)}
    arm = build_arm(name="a")
    for loader in ("image_text_to_text", None):
        out = tmp_path / str(loader)
        result = generate_arm(
            arm,
            prompts=prompts,
            keys=list(prompts),
            model_dir=tmp_path,
            out_dir=out,
            plan_hash="h",
            manifest_digest="",
            progress=False,
            tokenizer=FakeChatTokenizer(),
            loader=loader,
        )
        assert json.loads(result.meta_path.read_text())["backend"]["loader"] == loader


def test_vllm_logs_only_warnings_on_stderr_unless_the_user_asks(
    tmp_path: Path, fake_vllm: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's INFO lines (on stdout by default) would flood a `--no-progress` run: the engine is built
    with WARNING on stderr, for its own process too (the env), unless the user set the variables."""
    from capsule.generation.backends.vllm import VLLMBackend

    monkeypatch.delenv("VLLM_LOGGING_LEVEL", raising=False)
    monkeypatch.delenv("VLLM_LOGGING_STREAM", raising=False)
    monkeypatch.setattr(logging.getLogger("vllm"), "level", logging.INFO)
    arm = build_arm(backend="vllm", backend_options={"enforce_eager": True})
    model = checkpoint(tmp_path / "m", "LlamaForCausalLM")
    backend = VLLMBackend(model, arm, "causal_lm")
    assert _Engine.logging_env == [("WARNING", "ext://sys.stderr")]
    assert logging.getLogger("vllm").level == logging.WARNING
    backend.close()
    assert "VLLM_LOGGING_LEVEL" not in os.environ  # restored with the arm's env
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "INFO")
    VLLMBackend(model, arm, "causal_lm").close()
    assert _Engine.logging_env[-1][0] == "INFO" and logging.getLogger("vllm").level == logging.INFO


@pytest.mark.parametrize("cuda", [False, True])
def test_vllm_closes_a_cpu_engine_with_a_short_grace(
    tmp_path: Path, fake_vllm: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, cuda: bool
) -> None:
    """On the CPU the engine process is killed after CPU_SHUTDOWN_GRACE_S (it never exits by itself:
    5 s per engine); on a GPU vLLM keeps its own grace (None), for the device's memory to be freed."""
    import torch

    from capsule.generation.backends.vllm import CPU_SHUTDOWN_GRACE_S, VLLMBackend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    model = checkpoint(tmp_path / "m", "LlamaForCausalLM")
    backend = VLLMBackend(model, build_arm(backend="vllm"), "causal_lm")
    backend.close()
    assert _Engine.shutdowns == [None if cuda else CPU_SHUTDOWN_GRACE_S] and backend.llm is None

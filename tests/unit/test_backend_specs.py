"""Backend declarations: one table for the plan loader and the backends; lazy imports for real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from arm_builder import build_arm

from capsule.errors import BadInputError
from capsule.generation.backends import arm_options
from capsule.prereg.backend_options import check_options
from capsule.prereg.backend_specs import (
    SPECS,
    HFOptions,
    ServerClientOptions,
    ServerOptions,
    VLLMEngineOptions,
)
from capsule.prereg.loader import load_plan

LAZY_PROBE = """
import json, sys
from pathlib import Path
from capsule.generation.backends import backend_class, check_backend
from capsule.prereg.loader import load_plan
for study in ("smoke", "smoke-v2", "smollm2-135m", "smollm2-135m-v2", "smollm2-135m-v3", "agents-a1-4b",
              "agents-a1-4b-v2", "agents-a1-4b-v3"):
    load_plan(Path("prereg") / study)
classes = {}
for name in ("hf", "vllm", "server", "fake"):
    cls = backend_class(name)
    generate = getattr(cls, "generate", None)
    classes[name] = [isinstance(cls, type), getattr(cls, "name", None), callable(generate)]
heavy = sorted(m for m in ("torch", "transformers", "vllm", "httpx") if m in sys.modules)
print(json.dumps({"classes": classes, "heavy": heavy}))
"""


def test_registry_is_lazy(repo_root: Path) -> None:
    """Loading every sealed plan and resolving every backend class imports no torch, transformers
    or vllm (a fresh interpreter, so nothing imported by other tests can hide an import)."""
    done = subprocess.run(
        [sys.executable, "-c", LAZY_PROBE], cwd=repo_root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.splitlines()[-1])
    assert probe["heavy"] == []
    assert probe["classes"] == {
        "hf": [True, "hf", True],
        "vllm": [True, "vllm", True],
        "server": [True, "server", True],
        "fake": [True, "fake", True],
    }


def test_unknown_option_is_refused_with_the_allowed_list() -> None:
    with pytest.raises(BadInputError) as caught:
        check_options("hf", {"attn": "sdpa"}, "arm 'x'.backend_options", plan=True)
    assert str(caught.value) == (
        "arm 'x'.backend_options: unknown key 'attn' for backend 'hf' (allowed: attn_implementation, device)"
    )


def test_required_option_only_required_of_plans() -> None:
    with pytest.raises(BadInputError, match=r"^w: missing required key 'enforce_eager'"):
        check_options("vllm", {"max_model_len": 2048}, "w", plan=True)
    assert check_options("vllm", {"max_model_len": 2048}, "w", plan=False) == {"max_model_len": 2048}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"enforce_eager": 1}, "'enforce_eager' must be a bool, got 1"),
        ({"enforce_eager": True, "max_model_len": True}, "'max_model_len' must be a int, got True"),
        ({"enforce_eager": True, "max_model_len": 2048.0}, "'max_model_len' must be a int, got 2048.0"),
        (
            {"enforce_eager": True, "gpu_memory_utilization": "0.3"},
            "'gpu_memory_utilization' must be a float",
        ),
        (
            {"enforce_eager": True, "enable_prefix_caching": 0},
            "'enable_prefix_caching' must be a bool, got 0",
        ),
        ({"enforce_eager": True, "kv_cache_dtype": 8}, "'kv_cache_dtype' must be a str, got 8"),
    ],
)
def test_option_types_are_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        check_options("vllm", options, "w", plan=True)


def test_integer_given_for_a_float_becomes_a_float() -> None:
    checked = check_options("vllm", {"enforce_eager": False, "gpu_memory_utilization": 1}, "w", plan=True)
    assert checked == {"enforce_eager": False, "gpu_memory_utilization": 1.0}
    assert type(checked["gpu_memory_utilization"]) is float


def test_the_loader_refuses_what_the_backend_would(smoke_copy_plan: Path) -> None:
    """A plan option the hf backend does not declare is refused at load time, naming the arm."""
    text = smoke_copy_plan.read_text(encoding="utf-8")
    assert "backend_options = {}" in text
    smoke_copy_plan.write_text(text.replace("backend_options = {}", "backend_options = { device = 0 }", 1))
    with pytest.raises(BadInputError, match=r"backend_options: 'device' must be a str, got 0"):
        load_plan(smoke_copy_plan)
    smoke_copy_plan.write_text(text.replace("backend_options = {}", 'backend_options = { turbo = "on" }', 1))
    with pytest.raises(BadInputError, match=r"unknown key 'turbo' for backend 'hf' \(allowed: attn_impl"):
        load_plan(smoke_copy_plan)


def test_backends_run_with_declared_defaults_under_the_arm_options() -> None:
    arm = build_arm(name="v", backend="vllm", backend_options={"enforce_eager": False, "block_size": 16})
    resolved = arm_options("vllm", arm, VLLMEngineOptions)
    assert set(resolved.to_json()) == set(SPECS["vllm"].options)
    assert resolved.enforce_eager is False and resolved.block_size == 16
    assert resolved.max_model_len is None  # undeclared default: vLLM's own, recorded as resolved
    with pytest.raises(BadInputError, match=r"^arm 'v'.backend_options: unknown key 'max_num_seqs'"):
        arm_options("vllm", build_arm(name="v", backend_options={"max_num_seqs": 4}), VLLMEngineOptions)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_backend_declares_its_options_once_in_its_dataclass(name: str) -> None:
    """The loader's table is read from the options dataclass: same names, types, defaults, choices."""
    spec = SPECS[name]
    built = spec.options_type()  # every option has a default (a required one serves ad-hoc arms)
    assert built.to_json() == {option: declared.default for option, declared in spec.options.items()}
    for option, declared in spec.options.items():
        value = getattr(built, option)
        assert value is None or isinstance(value, declared.type), option
        assert not declared.choices or value in declared.choices, option
        assert declared.why, option


def test_a_server_arms_options_split_into_client_and_engine_settings() -> None:
    arm = build_arm(name="s", backend="server", backend_options={"concurrency": 4, "enforce_eager": False})
    options = arm_options("server", arm, ServerOptions)
    assert set(options.client()) == set(ServerClientOptions.table())
    assert set(options.engine()) == set(VLLMEngineOptions.table())
    assert options.client()["concurrency"] == 4 and options.engine()["enforce_eager"] is False
    assert set(options.client()) | set(options.engine()) == set(SPECS["server"].options)
    with pytest.raises(TypeError, match="declares ServerOptions options, not HFOptions"):
        arm_options("server", arm, HFOptions)


@pytest.fixture
def smoke_copy_plan(tmp_path: Path, repo_root: Path) -> Path:
    """A writable copy of prereg/smoke/plan.toml."""
    import shutil

    target = tmp_path / "prereg" / "smoke"
    shutil.copytree(repo_root / "prereg" / "smoke", target)
    return target / "plan.toml"

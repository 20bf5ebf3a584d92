"""`capsule reproduce --rehearse`: the stand-in model it builds, how it shrinks each arm, the report's
warning, and its refusals (a plan that is not sealed, `--results` inside `results/`).

The builder tests build the Qwen3.5 stand-in and its vLLM substitute once (random weights, a few MB,
seconds); the end-to-end rehearsal of the GPU plan is `tests/integration/test_rehearse_gpu_plan.py` (slow).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from capsule.artifacts.embedded_model import MODEL_RECORD, fetch_model, verify_model_dir
from capsule.artifacts.stand_in import STAND_IN_KIND, StandIn, build_stand_in, stand_in_spec
from capsule.artifacts.stand_in_shapes import QWEN3_5, QWEN3_NEXT, REHEARSAL_SIZE, STAND_INS
from capsule.cli import cli
from capsule.errors import BadInputError
from capsule.pipeline.rehearsal import Rehearsal, check_rehearsal_root
from capsule.prereg.loader import load_plan
from capsule.report.headline import fake_data_note

REPO = Path(__file__).resolve().parents[2]
GPU_PLAN = REPO / "prereg" / "agents-a1-4b-v2"
SPEC = STAND_INS["InternScience/Agents-A1-4B"]


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> StandIn:
    return build_stand_in(SPEC, tmp_path_factory.mktemp("stand-ins"))


def _config(directory: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((directory / "config.json").read_text())


def test_stand_in_is_the_plans_architecture_shrunk_keeping_one_layer_of_each_type(stand_in: StandIn) -> None:
    config = _config(stand_in.model_dir)
    assert config["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert config["model_type"] == "qwen3_5"
    text = config["text_config"]
    assert sorted(text["layer_types"]) == ["full_attention", "linear_attention"]
    assert text["num_hidden_layers"] == 2 and text["hidden_size"] == 64
    assert text["head_dim"] == 256 and text["linear_key_head_dim"] == 128  # per-head geometry kept
    embedded, _ = fetch_model()
    assert text["vocab_size"] == _config(embedded)["vocab_size"]  # every id the tokenizer makes is embedded
    # the image / video placeholders lie past the vocabulary: a text prompt never holds them
    assert min(config[k] for k in ("image_token_id", "video_token_id")) >= text["vocab_size"]
    substitute = _config(stand_in.vllm_dir)
    assert substitute["architectures"] == ["Qwen3NextForCausalLM"]
    assert sorted(set(substitute["layer_types"])) == ["full_attention", "linear_attention"]
    substitution = verify_model_dir(stand_in.model_dir)["source"]["vllm_substitute"]
    assert substitution["architecture"] == "Qwen3NextForCausalLM" and "torchvision" in substitution["why"]
    for directory in (stand_in.model_dir, stand_in.vllm_dir):
        record = verify_model_dir(directory)  # every file recorded and matching
        assert record["source"]["kind"] == STAND_IN_KIND
        assert (directory / "tokenizer.json").read_bytes() == (embedded / "tokenizer.json").read_bytes()


def test_stand_in_loads_with_the_plans_loader_and_generates_and_its_template_switches_thinking(
    stand_in: StandIn,
) -> None:
    import torch
    import transformers

    from capsule.generation.chat import load_chat_tokenizer
    from capsule.prereg.backend_specs import MODEL_LOADERS

    auto = getattr(transformers, MODEL_LOADERS[load_plan(GPU_PLAN).model.loader])
    model = auto.from_pretrained(str(stand_in.model_dir), dtype=torch.bfloat16)
    assert type(model).__name__ == "Qwen3_5ForConditionalGeneration"
    chat = load_chat_tokenizer(stand_in.model_dir)
    on, off = chat.render("Say hi.", "on"), chat.render("Say hi.", "off")
    assert chat.supports_thinking and off[: len(on)] == on and "</think>" in chat.decode(off[len(on) :])
    out = model.generate(input_ids=torch.tensor([on]), max_new_tokens=4, do_sample=False)
    assert out.shape == (1, len(on) + 4)


def test_the_substitute_renders_the_ids_the_plans_architecture_renders(
    stand_in: StandIn, tmp_path: Path
) -> None:
    """A qwen3_5 checkpoint gets transformers' Qwen3_5Tokenizer, whose own pre-tokenizer splits
    whitespace differently from tokenizer.json's: without the declared class in every stand-in, the
    Qwen3-Next substitute's arms received other input ids than the transformers arms."""
    import shutil

    from transformers import AutoTokenizer

    from capsule.generation.chat import load_chat_tokenizer

    plain = tmp_path / "plain"  # the plan architecture's directory with the embedded tokenizer_config
    shutil.copytree(stand_in.model_dir, plain)
    embedded, _ = fetch_model()
    shutil.copyfile(embedded / "tokenizer_config.json", plain / "tokenizer_config.json")
    assert type(AutoTokenizer.from_pretrained(str(plain))).__name__ == SPEC.tokenizer_class
    ours, substitute = load_chat_tokenizer(stand_in.model_dir), load_chat_tokenizer(stand_in.vllm_dir)
    for text in ("a  b\n\nc", "List 3 items.\n\n* one\n* two"):
        for thinking in ("on", "off"):
            assert ours.render(text, thinking) == substitute.render(text, thinking)


def test_stand_in_is_built_once_and_byte_identical_from_its_seed(stand_in: StandIn, tmp_path: Path) -> None:
    again = build_stand_in(SPEC, stand_in.model_dir.parent)  # cached: the same directories
    assert again.model_dir == stand_in.model_dir and again.vllm_dir == stand_in.vllm_dir
    fresh = build_stand_in(replace(SPEC, vllm_shape=None), tmp_path)  # built again elsewhere
    tree = json.loads((fresh.model_dir / MODEL_RECORD).read_text())["tree_digest"]
    assert tree == json.loads((stand_in.model_dir / MODEL_RECORD).read_text())["tree_digest"]
    assert fresh.vllm_dir == fresh.model_dir  # no substitute declared: every backend runs the one model


def test_unknown_model_has_no_stand_in() -> None:
    model = replace(load_plan(GPU_PLAN).model, repo="someone/else")
    with pytest.raises(BadInputError, match="no rehearsal stand-in is declared for model 'someone/else'"):
        stand_in_spec(model)


def test_rehearsal_shrinks_every_arm_and_puts_the_vllm_backends_on_the_substitute(tmp_path: Path) -> None:
    plan = load_plan(GPU_PLAN)
    rehearsal = Rehearsal(StandIn(SPEC, tmp_path / "qwen3_5", tmp_path / "qwen3next"))
    by_name = {arm.name: arm for arm in plan.arms}
    hf, vllm, bi, server = (by_name[n] for n in ("hf-greedy-b24", "vllm-greedy-b24", "vllm-bi-greedy-b24",
                                                  "vllm-server-authors"))
    assert rehearsal.arm(hf) == replace(hf, max_new_tokens=REHEARSAL_SIZE.max_new_tokens)
    for arm in (vllm, bi, server):
        shrunk = rehearsal.arm(arm)
        assert shrunk.max_new_tokens == REHEARSAL_SIZE.max_new_tokens
        assert shrunk.batch_size == arm.batch_size and shrunk.seed == arm.seed
        # an offline engine is built in the lane's process; a launched server keeps its engine process
        added = {} if arm is server else {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        assert shrunk.env == {**added, **arm.env}
        assert shrunk.decoding == arm.decoding and shrunk.thinking == arm.thinking
        assert "gpu_memory_utilization" not in shrunk.backend_options
        assert shrunk.backend_options["enforce_eager"] is True
        kv_bytes = REHEARSAL_SIZE.vllm_options["kv_cache_memory_bytes"]
        assert shrunk.backend_options["kv_cache_memory_bytes"] == kv_bytes
        assert shrunk.backend_options["max_model_len"] == arm.backend_options["max_model_len"]
    assert rehearsal.arm(server).backend_options["concurrency"] == 64  # the authors' clients, kept
    own = replace(vllm, env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"})  # an arm that says otherwise wins
    assert rehearsal.arm(own).env == own.env
    assert rehearsal.model(hf) == (tmp_path / "qwen3_5", QWEN3_5.loader)
    assert rehearsal.model(server) == rehearsal.model(vllm) == (tmp_path / "qwen3next", QWEN3_NEXT.loader)
    assert rehearsal.keys(list(range(541))) == [0, 1]


def test_report_of_a_rehearsal_says_so_first_and_names_the_substitute(stand_in: StandIn) -> None:
    from capsule.machine.manifest import model_fingerprint
    from capsule.machine.manifest_record import parse_manifest

    manifest = parse_manifest({"model": model_fingerprint(stand_in.model_dir)})  # a rehearsal's model
    note = fake_data_note(None, manifest)  # type: ignore[arg-type]  # the manifest decides, first
    assert note is not None and note.startswith("**REHEARSAL: STAND-IN MODEL.**")
    assert "not recorded in the ledger" in note
    assert "The vllm, server arms ran on a Qwen3NextForCausalLM stand-in instead" in note


def _reproduce(*args: str) -> Result:
    return CliRunner().invoke(cli, ["reproduce", "--no-progress", "--rehearse", *args])


def _refused(result: Result, fragment: str) -> None:
    lines = result.output.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error: ")]
    assert result.exit_code == 2, result.output
    assert len(errors) == 1 and fragment in errors[0], result.output


def test_rehearsal_of_a_plan_that_is_not_sealed_is_refused(repo_copy: Path) -> None:
    copy = repo_copy / "prereg" / "unsealed-copy"
    copy.mkdir()
    (copy / "plan.toml").write_bytes((GPU_PLAN / "plan.toml").read_bytes())
    _refused(_reproduce("--plan", "prereg/unsealed-copy"), "prereg/unsealed-copy/plan.toml is not sealed")
    assert not (repo_copy / "runs").exists()


@pytest.mark.parametrize("results", ["results", "results/inside", "./results/../results/x"])
def test_rehearsal_into_results_is_refused(repo_copy: Path, results: str) -> None:
    ledger = (repo_copy / "prereg" / "ledger.jsonl").read_bytes()
    _refused(_reproduce("--plan", "prereg/agents-a1-4b-v2", "--results", results), "never goes into results/")
    assert not (repo_copy / "results").exists() and not (repo_copy / "runs").exists()
    assert (repo_copy / "prereg" / "ledger.jsonl").read_bytes() == ledger


def test_rehearsal_root_outside_results_is_allowed(tmp_path: Path) -> None:
    check_rehearsal_root(tmp_path / "runs" / "rehearsal", tmp_path)
    check_rehearsal_root(tmp_path / "results-elsewhere", tmp_path)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [(["--dry-run"], "exclude each other"), (["--model-dir", "x"], "leave out --model-dir"),
     (["--endpoint", "http://127.0.0.1:1/v1"], "leave out --model-dir and --endpoint")],
)
def test_rehearse_refuses_options_that_do_not_apply(repo_copy: Path, extra: list[str], fragment: str) -> None:
    result = _reproduce("--plan", "prereg/agents-a1-4b-v2", *extra)
    assert result.exit_code == 2 and fragment in result.output
    assert not (repo_copy / "runs").exists()

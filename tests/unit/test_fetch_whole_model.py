"""`capsule fetch --plan` fetches the whole model a loader reads (issue 27 item 3), from a fake hub
serving a Qwen3.5-shaped snapshot: the pinned files checked by sha256, every other loader file
(generation config, tokenizer config, processor configs) fetched too, no other weight format; a
snapshot missing a processor config, or a pinned file of another sha256, is one error naming the
file (exit 2 or 3) and nothing is moved into the model directory. `capsule doctor --plan` loads
config, tokenizer, generation config and processor without weights and names what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_fixture import COMMIT, QWEN35_CONFIG, QWEN35_MODEL, QWEN35_PINNED, REPO, FakeHubApi, sha256

from capsule.artifacts.hub import fetch_hub_model
from capsule.errors import BadInputError, VerificationError
from capsule.machine.loader_check import check_loadable
from capsule.prereg.plan import Model

EMBEDDED = Path.home() / ".cache" / "capsule" / "models" / "smollm2-135m-instruct-q4_1-bf16"


def _model(files: dict[str, bytes]) -> Model:
    return Model(
        name=REPO, source="hub", files={n: sha256(files[n]) for n in QWEN35_PINNED}, repo=REPO,
        revision=COMMIT, loader="image_text_to_text",
    )


def test_every_loader_file_is_fetched_and_no_other_weight_format(tmp_path: Path) -> None:
    api, target = FakeHubApi(QWEN35_MODEL), tmp_path / "models" / "Agents-A1-4B"
    fetched = fetch_hub_model(_model(QWEN35_MODEL), target, api)
    expected = sorted(n for n in QWEN35_MODEL if n not in ("README.md", "pytorch_model.bin"))
    assert sorted(fetched) == expected and sorted(p.name for p in target.iterdir()) == expected
    for name in ("generation_config.json", "tokenizer_config.json", "preprocessor_config.json",
                 "video_preprocessor_config.json"):
        assert (target / name).read_bytes() == QWEN35_MODEL[name]
    assert fetch_hub_model(_model(QWEN35_MODEL), target, api) == []  # all there: nothing again


def test_a_snapshot_without_a_processor_config_is_refused(tmp_path: Path) -> None:
    files = {n: b for n, b in QWEN35_MODEL.items() if n != "preprocessor_config.json"}
    target = tmp_path / "models" / "Agents-A1-4B"
    with pytest.raises(BadInputError) as refused:
        fetch_hub_model(_model(files), target, FakeHubApi(files))
    message = str(refused.value)
    assert "no preprocessor_config.json, which the image_text_to_text loader reads" in message
    assert "\n" not in message and refused.value.exit_code == 2
    assert not target.exists()


def test_a_pinned_file_of_another_sha256_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "models" / "Agents-A1-4B"
    api = FakeHubApi(QWEN35_MODEL, corrupt=("tokenizer.json",))
    with pytest.raises(VerificationError) as refused:
        fetch_hub_model(_model(QWEN35_MODEL), target, api)
    assert str(refused.value).startswith("tokenizer.json: sha256 ") and refused.value.exit_code == 3
    assert "\n" not in str(refused.value) and not target.exists()


def _qwen35_dir(directory: Path, drop: str = "") -> Path:
    """A Qwen3.5-shaped directory that loads: its configs, with the embedded model's tokenizer."""
    directory.mkdir(parents=True)
    for name in ("config.json", "generation_config.json", "preprocessor_config.json",
                 "video_preprocessor_config.json"):
        directory.joinpath(name).write_bytes(QWEN35_MODEL[name])
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        directory.joinpath(name).write_bytes((EMBEDDED / name).read_bytes())
    assert json.loads((directory / "config.json").read_text())["model_type"] == QWEN35_CONFIG["model_type"]
    if drop:
        (directory / drop).unlink()
    return directory


@pytest.mark.skipif(not EMBEDDED.is_dir(), reason="needs the embedded model's tokenizer (make setup)")
def test_doctor_loads_without_weights_and_names_what_is_missing(tmp_path: Path) -> None:
    lacking = _qwen35_dir(tmp_path / "a", drop="preprocessor_config.json")
    missing = check_loadable(lacking, "image_text_to_text")
    assert missing.problem.endswith("no preprocessor_config.json, which the image_text_to_text loader reads")
    broken = _qwen35_dir(tmp_path / "b")
    (broken / "generation_config.json").write_text("{not json", encoding="utf-8")
    checked = check_loadable(broken, "image_text_to_text")
    assert checked.loaded == ("Qwen3_5Config", "Qwen3_5Tokenizer")
    assert "generation_config.json do(es) not load" in checked.problem and "\n" not in checked.problem
    whole = check_loadable(_qwen35_dir(tmp_path / "c"), "causal_lm")
    assert whole.loaded == ("Qwen3_5Config", "Qwen3_5Tokenizer", "GenerationConfig") and not whole.problem

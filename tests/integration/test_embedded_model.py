"""The embedded model directory: verified files, and transformers loads it and generates greedily."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from capsule.artifacts.embedded_model import MODEL_RECORD, verify_model_dir
from capsule.errors import VerificationError
from capsule.pins import EMBEDDED_MODEL_GGUF

pytestmark = pytest.mark.slow


def test_record_pins_every_file(embedded_model_dir: Path) -> None:
    record = verify_model_dir(embedded_model_dir)
    assert record["source"]["gguf_sha256"] == EMBEDDED_MODEL_GGUF.sha256
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(record["files"])


def test_tampered_copy_fails_verification(embedded_model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    copy.mkdir()
    for name in ("config.json", MODEL_RECORD):
        (copy / name).write_bytes((embedded_model_dir / name).read_bytes())
    record = json.loads((copy / MODEL_RECORD).read_text())
    record["files"] = {"config.json": record["files"]["config.json"]}
    (copy / MODEL_RECORD).write_text(json.dumps(record))
    verify_model_dir(copy)
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("576", "577"))
    with pytest.raises(VerificationError, match="config.json: sha256"):
        verify_model_dir(copy)


def test_transformers_loads_and_generates_greedily(embedded_model_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir)
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, dtype=torch.bfloat16)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.inference_mode():
        first = model.generate(**ids, max_new_tokens=12, do_sample=False)
        second = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert torch.equal(first, second)
    text = tokenizer.decode(first[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in text


def test_hf_backend_applies_the_arms_env(embedded_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sealed env on an hf arm reaches the process while the model is loaded, is recorded in the
    backend's description (so in every generations meta), and is undone by close()."""
    from dataclasses import replace

    from capsule.generation.backends import load_backend
    from capsule.generation.targets import adhoc_target
    from capsule.prereg.adhoc import AdhocOptions

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    options = AdhocOptions("env", "hf", "float32", 1, "file", 0, 4)
    arm = adhoc_target(options, None, 1, None, dry_run=False).arm
    backend = load_backend("hf", embedded_model_dir, replace(arm, env={"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}))
    try:
        assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == ":4096:8"
        assert backend.describe()["env"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        backend.close()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ

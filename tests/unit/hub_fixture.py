"""A fake hub for tests: `FakeHubApi` answers the three `huggingface_hub.HfApi` calls the capsule
makes (model_info with files metadata, hf_hub_download, snapshot_download) from files held in memory,
so `capsule plan new` and `capsule fetch --plan` run against hub metadata with no network."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "example-org/tiny-instruct"
LFS_SUFFIXES = (".safetensors",)

TINY_MODEL: dict[str, bytes] = {
    "config.json": json.dumps(
        {"architectures": ["LlamaForCausalLM"], "dtype": "bfloat16", "max_position_embeddings": 4096}
    ).encode(),
    "generation_config.json": json.dumps({"do_sample": True, "temperature": 0.6, "top_p": 0.9}).encode(),
    "tokenizer_config.json": json.dumps({"chat_template": "{{ messages }}"}).encode(),
    "tokenizer.json": b"{}",
    "model.safetensors": b"not really weights, but bytes with a sha256",
    "README.md": b"# a card\n",  # not pinned: docs do not change outputs
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_model(directory: Path, files: dict[str, bytes] = TINY_MODEL) -> Path:
    """The fake model's files in a local directory (as a user's download would be)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


class FakeHubApi:
    """One repository at one commit; `corrupt` names files served with other bytes by snapshot_download."""

    def __init__(self, files: dict[str, bytes] = TINY_MODEL, corrupt: tuple[str, ...] = ()) -> None:
        self.files, self.corrupt = dict(files), corrupt
        self.downloads: list[str] = []
        self.snapshots: list[list[str]] = []

    def _check(self, repo: str, revision: str | None) -> None:
        if repo != REPO or revision not in (COMMIT, "main"):
            raise RuntimeError(f"404 {repo}@{revision}")

    def model_info(self, repo: str, *, revision: str | None = None, files_metadata: bool = False) -> Any:
        self._check(repo, revision)
        assert files_metadata, "the capsule asks for files metadata (LFS sha256)"
        siblings = [
            SimpleNamespace(
                rfilename=name,
                size=len(data),
                lfs=SimpleNamespace(sha256=sha256(data), size=len(data))
                if name.endswith(LFS_SUFFIXES)
                else None,
            )
            for name, data in self.files.items()
        ]
        return SimpleNamespace(sha=COMMIT, siblings=siblings)

    def hf_hub_download(self, repo: str, filename: str, *, revision: str, local_dir: Path) -> str:
        self._check(repo, revision)
        self.downloads.append(filename)
        path = Path(local_dir) / filename
        path.write_bytes(self.files[filename])
        return str(path)

    def snapshot_download(
        self, *, repo_id: str, revision: str, allow_patterns: list[str], local_dir: Path
    ) -> str:
        self._check(repo_id, revision)
        self.snapshots.append(list(allow_patterns))
        for name, data in self.files.items():
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in allow_patterns):
                (Path(local_dir) / name).write_bytes(data + b"!" if name in self.corrupt else data)
        return str(local_dir)

# A snapshot in the shape of a Qwen3.5 image-text-to-text checkpoint (InternScience/Agents-A1-4B's
# file list): two weight shards and their index, the configs, tokenizer files, processor configs and
# chat template a loader reads, plus files no loader reads (a card, another weight format).
QWEN35_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text", "hidden_size": 64, "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "full_attention"], "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128, "vocab_size": 49152,
    },
    "vision_config": {
        "model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 32, "num_heads": 2, "out_hidden_size": 64,
    },
}
_PROCESSOR = {
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "processor_class": "Qwen3VLProcessor",
}
QWEN35_MODEL: dict[str, bytes] = {
    "config.json": json.dumps(QWEN35_CONFIG).encode(),
    "generation_config.json": json.dumps({"eos_token_id": [2, 0], "do_sample": True}).encode(),
    "tokenizer_config.json": json.dumps({"tokenizer_class": "Qwen2Tokenizer"}).encode(),
    "tokenizer.json": b"{}",
    "chat_template.jinja": b"{{ messages }}",
    "preprocessor_config.json": json.dumps(
        {"image_processor_type": "Qwen2VLImageProcessor", **_PROCESSOR}
    ).encode(),
    "video_preprocessor_config.json": json.dumps(
        {"video_processor_type": "Qwen3VLVideoProcessor", **_PROCESSOR}
    ).encode(),
    "model.safetensors.index.json": b'{"weight_map": {}}',
    "model-00000-of-00002.safetensors": b"shard zero",
    "model-00001-of-00002.safetensors": b"shard one",
    "pytorch_model.bin": b"another weight format: never fetched",
    "README.md": b"# a card\n",
}
#: What a plan of it pins (as agents-a1-4b-v2 and -v3 do: weights, index, tokenizer, template, config).
QWEN35_PINNED = ("model-00000-of-00002.safetensors", "model-00001-of-00002.safetensors",
                 "model.safetensors.index.json", "tokenizer.json", "chat_template.jinja", "config.json")

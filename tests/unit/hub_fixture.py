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

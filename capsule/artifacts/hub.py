"""A hub model at a pinned revision: its files' sha256 read from the hub, and its download, verified.

Both go through `huggingface_hub.HfApi` (imported on first use; tests pass a fake). The hub's file
metadata (`model_info(..., files_metadata=True)`) carries the sha256 of every LFS file (the weights),
so those are pinned without downloading them. Other files (configs, tokenizer, chat template: small)
carry only a git blob id, which is not a sha256 of the bytes, so `read_hub_snapshot` downloads them
to hash them; the configs are downloaded in any case, because the standard plan reads them.

`fetch_hub_model` downloads the files a plan pins at its revision, and every other file of that
revision a loader reads (configs, tokenizer files, generation config, processor configs, chat
template: `model_files.pinned_names`, never another weight format), into a staging directory beside
the model's directory; checks the pinned ones against the plan and LFS ones against the hub's
sha256; refuses a revision that lacks a file the plan's loader reads; and only then moves them into
place: a file whose sha256 differs, or a snapshot missing a file, never reaches the directory the
capsule loads from. The run's manifest records every file's sha256 (`machine.manifest`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.cache import set_aside
from capsule.artifacts.model_files import CONFIG_FILES, missing_loader_file, pinned_names, pinned_paths
from capsule.errors import BadInputError, UnavailableError, VerificationError
from capsule.hashing import sha256_file
from capsule.prereg.plan import Model

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
INSTALL_HINT = "pip install huggingface_hub"


def hub_api() -> Any:
    """A `huggingface_hub.HfApi` (UnavailableError naming the install when the package is missing)."""
    try:
        from huggingface_hub import HfApi
    except ImportError as error:
        raise UnavailableError(f"hub models need huggingface_hub ({INSTALL_HINT}): {error}") from error
    return HfApi()


@dataclass(frozen=True)
class HubSnapshot:
    """A hub repository at one commit: the pinned files' sha256 and sizes, and which were downloaded."""

    repo: str
    commit: str
    files: dict[str, str]  # name -> sha256
    sizes: dict[str, int]  # name -> bytes (0 where the hub does not say)
    downloaded: tuple[str, ...]  # the small files fetched into config_dir to be hashed (and read)
    config_dir: Path


def read_hub_snapshot(repo: str, revision: str, config_dir: Path, api: Any = None) -> HubSnapshot:
    """The files a plan pins of `repo` at `revision` (a commit, branch or tag: resolved to its commit),
    with their sha256: LFS files' from the metadata, the others' from downloading them to `config_dir`."""
    api = api if api is not None else hub_api()
    try:
        info = api.model_info(repo, revision=revision, files_metadata=True)
    except Exception as error:  # the hub client raises errors of several libraries (HTTP, network, ids)
        raise UnavailableError(
            f"hub model {repo}@{revision}: {type(error).__name__}: {error}; check the id and the revision, "
            "or give a local model directory"
        ) from error
    commit = str(getattr(info, "sha", "") or "")
    if not COMMIT_RE.match(commit):
        raise UnavailableError(f"hub model {repo}@{revision}: the hub gave no commit for the revision")
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    names = pinned_names(siblings)
    fetch = [n for n in names if siblings[n].lfs is None or n in CONFIG_FILES]
    for name in fetch:
        api.hf_hub_download(repo, name, revision=commit, local_dir=config_dir)
    files: dict[str, str] = {}
    for name in names:
        lfs = siblings[name].lfs
        files[name] = sha256_file(config_dir / name) if name in fetch else str(lfs.sha256)
        if lfs is not None and files[name] != lfs.sha256:
            raise VerificationError(
                f"{repo}@{commit}: {name}: downloaded sha256 {files[name]}, "
                f"the hub's metadata says {lfs.sha256}"
            )
    sizes = {n: int(siblings[n].size or (siblings[n].lfs.size if siblings[n].lfs else 0) or 0) for n in names}
    return HubSnapshot(repo, commit, files, sizes, tuple(fetch), config_dir)


def _kept(target: Path, files: dict[str, str], say: Callable[[str], None]) -> list[str]:
    """The pinned files `target` still lacks: one that is present with the pinned sha256 is kept;
    one with another sha256 is set aside (renamed `<name>.corrupt-N`) and fetched again."""
    missing = []
    paths = pinned_paths(target, files)
    for name, expected in sorted(files.items()):
        path = paths[name]
        if path.is_file():
            if sha256_file(path) == expected:
                continue
            aside = set_aside(path)
            say(f"{path}: not the plan's sha256; moved aside to {aside.name}")
        missing.append(name)
    return missing


def fetch_hub_model(
    model: Model, target: Path, api: Any = None, say: Callable[[str], None] = lambda line: None
) -> list[str]:
    """Download the plan's pinned files of a hub model at its revision into `target`, each verified
    against the plan; returns the names downloaded (none when `target` already holds them all).

    VerificationError (exit 3) naming the file, the pinned and the actual sha256 on a mismatch; the
    bad file is set aside in the staging directory and nothing of this download enters `target`.
    """
    if model.source != "hub":
        raise BadInputError(
            f"model {model.name!r} has source {model.source!r}; only hub models are downloaded"
        )
    pinned_paths(target, model.files)  # every name checked before anything is touched
    missing = _kept(target, model.files, say)
    api = api if api is not None else hub_api()
    try:
        lfs = _loader_files(model, api, target)
    except UnavailableError as error:
        if missing:
            raise
        say(f"{error}; the pinned files are all present and verified, so nothing else was fetched")
        return []
    extra = sorted(name for name in lfs if name not in model.files and not (target / name).is_file())
    missing += extra
    if not missing:
        return []
    staging = target.parent / f".{target.name}.download"
    staging.mkdir(parents=True, exist_ok=True)
    say(f"downloading {len(missing)} file(s) of {model.repo}@{model.revision} into {staging}")
    try:
        api.snapshot_download(
            repo_id=model.repo, revision=model.revision, allow_patterns=missing, local_dir=staging
        )
    except Exception as error:  # network, authentication or a revision the hub does not have
        raise UnavailableError(
            f"hub model {model.repo}@{model.revision}: {type(error).__name__}: {error}; on a host without "
            "network, copy the model directory there and pass --model-dir (or set $CAPSULE_MODELS)"
        ) from error
    for name in missing:
        path = staging / name
        if name in extra:
            _check_extra(model, name, path, lfs[name], target)
            continue
        if not path.is_file():
            raise VerificationError(
                f"{model.repo}@{model.revision}: {name} was not downloaded (the revision has no such file), "
                "but the plan pins it"
            )
        actual = sha256_file(path)
        if actual != model.files[name]:
            aside = set_aside(path)
            raise VerificationError(
                f"{name}: sha256 {actual}, the plan pins {model.files[name]} "
                f"({model.repo}@{model.revision}); "
                f"set aside as {aside}, nothing moved into {target}"
            )
    target.mkdir(parents=True, exist_ok=True)
    for name in missing:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, target / name)
    shutil.rmtree(staging, ignore_errors=True)
    return missing


def _loader_files(model: Model, api: Any, target: Path) -> dict[str, str | None]:
    """Every file of the revision a loader reads, with the hub's sha256 for LFS files (None for the
    others); BadInputError naming the first file the plan's loader reads that the revision lacks."""
    try:
        info = api.model_info(model.repo, revision=model.revision, files_metadata=True)
    except Exception as error:  # the hub client raises errors of several libraries (HTTP, network, ids)
        raise UnavailableError(
            f"hub model {model.repo}@{model.revision}: {type(error).__name__}: {error}; on a host without "
            "network, copy the model directory there and pass --model-dir (or set $CAPSULE_MODELS)"
        ) from error
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    names = pinned_names(siblings)
    lacking = missing_loader_file(set(names) | set(model.files), model.loader)
    if lacking is not None:
        raise BadInputError(
            f"{model.repo}@{model.revision}: the snapshot has no {lacking}, which the {model.loader} loader "
            f"reads; nothing moved into {target}"
        )
    return {n: (str(siblings[n].lfs.sha256) if siblings[n].lfs is not None else None) for n in names}


def _check_extra(model: Model, name: str, path: Path, expected: str | None, target: Path) -> None:
    """An unpinned loader file as downloaded: present, and (an LFS file) of the hub's sha256."""
    if not path.is_file():
        raise VerificationError(
            f"{model.repo}@{model.revision}: {name} was not downloaded, though the revision lists it; "
            f"nothing moved into {target}"
        )
    if expected is not None and sha256_file(path) != expected:
        aside = set_aside(path)
        raise VerificationError(
            f"{name}: sha256 {sha256_file(aside)}, the hub's metadata says {expected} "
            f"({model.repo}@{model.revision}); set aside as {aside}, nothing moved into {target}"
        )

"""A manifest travels without the sender's layout: no host name, no absolute path; old ones still diff."""

from __future__ import annotations

import copy
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from reference_runs import V2_RUN

from capsule.errors import BadInputError
from capsule.machine.diff import NUMERICS, OTHER, diff_manifests
from capsule.machine.manifest import build_manifest, load_manifest, validate_manifest
from capsule.machine.numerics import PATH_DIGEST_PREFIX, numerics_env

REPO = Path(__file__).resolve().parents[2]
REFERENCE_RUN = V2_RUN  # committed, schema_version 1


@pytest.fixture(scope="module")
def new(prompts_path: Path, embedded_model_dir: Path) -> dict[str, Any]:
    """This machine's manifest with the model and the prompts, as a run records it."""
    return build_manifest(model_dir=embedded_model_dir, prompts_path=prompts_path)


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_new_manifest_records_no_host_name_and_no_absolute_path(
    new: dict[str, Any], prompts_path: Path, embedded_model_dir: Path
) -> None:
    strings = _strings(new)
    assert not [s for s in strings if s.startswith(("/", "~"))]
    assert socket.gethostname() not in strings
    for secret in (sys.executable, str(prompts_path), str(embedded_model_dir)):
        assert not [s for s in strings if secret in s], secret
    assert new["model"]["files"] and new["data"]["prompts"]["sha256"]  # what numerics need stays
    assert new["software"]["packages"]["torch"]["version"] and new["host"]["cpu"]["isa"]


def test_an_env_value_holding_a_path_is_hashed_and_others_are_kept() -> None:
    env = numerics_env({"TORCHINDUCTOR_CACHE_DIR": "/home/alice/cache", "OMP_NUM_THREADS": "2",
                        "VLLM_PLUGINS": "a,/opt/b"})
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(PATH_DIGEST_PREFIX) and "alice" not in str(env)
    assert env["VLLM_PLUGINS"].startswith(PATH_DIGEST_PREFIX)
    again = numerics_env({"TORCHINDUCTOR_CACHE_DIR": "/home/alice/cache"})
    assert again["TORCHINDUCTOR_CACHE_DIR"] == env["TORCHINDUCTOR_CACHE_DIR"]  # equal values compare equal


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["host"].update(hostname="laptop"),
        lambda m: m["host"]["python"].update(executable="/usr/bin/python3"),
        lambda m: m["model"].update(path="/home/alice/model"),
        lambda m: m["data"]["prompts"].update(path="/home/alice/p.jsonl"),
        lambda m: m["scorer"].update(path="/home/alice/ifeval_scorer"),
    ],
)
def test_a_version_2_manifest_with_a_host_name_or_path_is_refused(  # type: ignore[no-untyped-def]
    new: dict[str, Any], edit
) -> None:
    bad = copy.deepcopy(new)
    edit(bad)
    with pytest.raises(BadInputError, match="host name or a path"):
        validate_manifest(bad)


def test_diff_of_the_old_reference_manifest_and_a_new_one(new: dict[str, Any]) -> None:
    old = load_manifest(REFERENCE_RUN)  # a version 1 manifest still loads
    assert old["schema_version"] == 1 and "hostname" in old["host"]
    rows = {d.path: d for d in diff_manifests(old, new).differences}
    for path in ("schema_version", "host.hostname", "host.python.executable", "model.path",
                 "data.prompts.path", "scorer.path"):
        assert rows[path].category == OTHER, path  # fields only the old one has: not numerics
        assert rows[path].b == "<absent>" or path == "schema_version"
    assert "model.files" not in rows and "data.prompts.sha256" not in rows  # same model, same prompts
    assert all(not path.startswith(("model.", "data.")) or rows[path].category == OTHER for path in rows)
    assert {d.category for d in rows.values()} <= {NUMERICS, OTHER}

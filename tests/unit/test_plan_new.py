"""`capsule plan new`: the standard plan written for a local model (the embedded one), a plain local
directory and a hub id (fake hub metadata, no network); each refusal; then seal and a dry run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from hub_fixture import COMMIT, REPO, TINY_MODEL, FakeHubApi, sha256, write_model

from capsule.artifacts import hub
from capsule.authoring import new_plan as new_plan_module
from capsule.authoring.standard_plan import CONTRAST_SUBSET, MIN_PAIRS
from capsule.cli import cli
from capsule.costing.sizing import fitting_subsample, plan_costs
from capsule.prereg.loader import load_plan

CLAIM = ["--claim", "29.9", "--reading", "card_avg_strict", "--source", "https://example.org/card"]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in (root / "prereg").rglob("*")}


@pytest.fixture()
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> FakeHubApi:
    api = FakeHubApi()
    monkeypatch.setattr(hub, "hub_api", lambda: api)
    return api


@pytest.fixture()
def fake_probe(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, str]]:
    """Replace the transformers probe (a real model run) by one that records its call."""
    calls: list[tuple[Path, str]] = []

    def probe(model_dir: Path, dtype: str) -> Any:
        calls.append((model_dir, dtype))
        return SimpleNamespace(tokens_per_s=250.0, describe=lambda d: f"250.0 tok/s (probe, {d})")

    monkeypatch.setattr(new_plan_module, "_default_probe", lambda: probe)
    return calls


def _seal_and_dry_run(name: str) -> Any:
    sealed = _invoke("prereg", "seal", f"prereg/{name}", "--note", "test plan")
    assert sealed.exit_code == 0, sealed.output
    assert f"prereg/{name}/plan.toml" in sealed.output
    return _invoke("reproduce", "--plan", f"prereg/{name}", "--dry-run", "--no-progress")


def test_embedded_model_plan_is_probed_sealed_and_dry_run(
    repo_copy: Path, embedded_model_dir: Path, fake_probe: list[tuple[Path, str]]
) -> None:
    result = _invoke(
        "plan",
        "new",
        "smol-check",
        "--model",
        str(embedded_model_dir),
        *CLAIM,
        "--max-new-tokens",
        "256",
        "--budget-minutes",
        "1",
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert fake_probe == [(embedded_model_dir, "bfloat16")]  # config.json's dtype
    directory = repo_copy / "prereg" / "smol-check"
    assert sorted(p.name for p in directory.rglob("*") if p.is_file()) == [
        "compliant.jsonl",
        "plan.toml",
        "rationale.md",
    ]
    plan = load_plan(directory)
    assert plan.model.source == "embedded"
    sealed_v2 = load_plan(repo_copy / "prereg" / "smollm2-135m-v2").model.files
    assert plan.model.files == sealed_v2  # the same six files, hashed here, as the hand-sealed plan pins
    assert (directory / "controls" / "compliant.jsonl").read_bytes() == (
        repo_copy / "prereg" / "smoke" / "controls" / "compliant.jsonl"
    ).read_bytes()
    kinds = {c.kind for c in plan.controls}
    assert kinds == {
        "rerun_identity",
        "batch_size",
        "backend",
        "seed_vs_batch",
        "scorer_stability",
        "scorer_sanity",
    }
    assert {a.dtype for a in plan.arms} == {"bfloat16", "float32"}
    assert plan.verdict.arm == "claim" and plan.verdict.metric == "card_avg_strict"
    # the cost printed is the arithmetic of the plan at the probed throughput
    claim_minutes = 541 * 256 / 250.0 / 60
    assert f"{'claim':<28} {541:>7} {541 * 256:>12,} {claim_minutes:>8.1f}" in result.output
    total = sum(c.minutes for c in plan_costs(plan, 250.0))
    assert f"{total:>8.1f}" in result.output.splitlines()[-2]
    assert "capsule prereg seal" in result.output
    assert "exceeds the 1-minute budget" in result.stderr  # the smallest subsample, and said so
    assert plan.prompts.subsets[CONTRAST_SUBSET].n == MIN_PAIRS
    run = _seal_and_dry_run("smol-check")
    assert run.exit_code == 0, run.output + run.stderr
    (run_dir,) = (repo_copy / "runs" / "dry-run" / "smol-check").iterdir()
    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert len(analysis["arms"]) == len(plan.arms) and len(analysis["controls"]) == len(plan.controls)
    assert not analysis["skipped_controls"]


def test_local_directory_is_a_path_model_sized_from_the_given_throughput(
    repo_copy: Path, tmp_path: Path, fake_probe: list[tuple[Path, str]]
) -> None:
    model_dir = write_model(tmp_path / "models" / "tiny-instruct")
    result = _invoke(
        "plan",
        "new",
        "tiny",
        "--model",
        str(model_dir),
        *CLAIM,
        "--tok-per-s",
        "40",
        "--budget-minutes",
        "90",
        "--max-new-tokens",
        "128",
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert fake_probe == []  # a given throughput is not probed
    plan = load_plan(repo_copy / "prereg" / "tiny")
    assert plan.model.source == "path" and plan.model.name == "tiny-instruct"
    assert plan.model.files == {n: sha256(d) for n, d in TINY_MODEL.items() if n != "README.md"}
    sample = next(a for a in plan.arms if a.decoding.mode == "sample").decoding
    assert (sample.temperature, sample.top_p) == (0.6, 0.9)  # generation_config.json's
    assert sum(c.minutes for c in plan_costs(plan, 40.0)) <= 90  # sized to the budget
    assert MIN_PAIRS < plan.prompts.subsets[CONTRAST_SUBSET].n < 541


def test_hub_id_plan_pins_the_commit_from_hub_metadata(repo_copy: Path, fake_hub: FakeHubApi) -> None:
    result = _invoke(
        "plan",
        "new",
        "tiny-hub",
        "--model",
        f"{REPO}@main",
        *CLAIM,
        "--tok-per-s",
        "1000",
        "--budget-minutes",
        "1",
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert f"resolved to commit {COMMIT}" in result.stderr
    plan = load_plan(repo_copy / "prereg" / "tiny-hub")
    assert (plan.model.source, plan.model.repo, plan.model.revision) == ("hub", REPO, COMMIT)
    assert plan.model.files == {n: sha256(d) for n, d in TINY_MODEL.items() if n != "README.md"}
    assert "model.safetensors" not in fake_hub.downloads  # an LFS file's sha256 comes from the metadata
    assert sorted(fake_hub.downloads) == sorted(
        n for n in TINY_MODEL if n not in ("README.md", "model.safetensors")
    )
    run = _seal_and_dry_run("tiny-hub")
    assert run.exit_code == 0, run.output + run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", REPO, *CLAIM, "--tok-per-s", "10"], "a hub id needs its revision"),
        (
            ["--model", f"{REPO}@main", "--claim", "29.9", "--reading", "ifeval", "--source", "u"],
            "is not a metric",
        ),
        (["--model", f"{REPO}@main", *CLAIM], "--tok-per-s is needed for a hub model"),
        (["--model", "no/such/dir", *CLAIM], "no such directory, and not a hub id"),
    ],
)
def test_refusals_write_nothing(repo_copy: Path, fake_hub: FakeHubApi, args: list[str], message: str) -> None:
    before = _listing(repo_copy)
    result = _invoke("plan", "new", "refused", *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1
    assert message in result.stderr
    assert _listing(repo_copy) == before


def test_model_directory_missing_a_needed_file_is_refused(repo_copy: Path, tmp_path: Path) -> None:
    files = {n: d for n, d in TINY_MODEL.items() if n not in ("tokenizer_config.json", "model.safetensors")}
    model_dir = write_model(tmp_path / "partial", files)
    before = _listing(repo_copy)
    result = _invoke("plan", "new", "partial", "--model", str(model_dir), *CLAIM, "--tok-per-s", "10")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "tokenizer_config.json" in result.stderr and "*.safetensors" in result.stderr
    assert _listing(repo_copy) == before


def test_hub_model_missing_a_needed_file_is_refused(repo_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeHubApi({n: d for n, d in TINY_MODEL.items() if n != "config.json"})
    monkeypatch.setattr(hub, "hub_api", lambda: api)
    result = _invoke("plan", "new", "nohub", "--model", f"{REPO}@{COMMIT}", *CLAIM, "--tok-per-s", "10")
    assert result.exit_code == 2 and "config.json" in result.stderr and f"{REPO}@{COMMIT}" in result.stderr
    assert not (repo_copy / "prereg" / "nohub").exists()


def test_existing_plan_directory_is_refused(repo_copy: Path, tmp_path: Path) -> None:
    model_dir = write_model(tmp_path / "m")
    plan_before = (repo_copy / "prereg" / "smoke" / "plan.toml").read_bytes()
    result = _invoke("plan", "new", "smoke", "--model", str(model_dir), *CLAIM, "--tok-per-s", "10")
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert (repo_copy / "prereg" / "smoke" / "plan.toml").read_bytes() == plan_before
    assert not [p for p in os.listdir(repo_copy / "prereg") if p.startswith(".")]


def test_contrast_subsample_fits_the_budget(repo_root: Path) -> None:
    plan = load_plan(repo_root / "prereg" / "agents-a1-4b")
    # "s80" arms: 4 arms x 1280 tokens per prompt; the rest is fixed
    generous = fitting_subsample(plan, "s80", 1e9, 60, MIN_PAIRS)
    tight = fitting_subsample(plan, "s80", 1.0, 60, MIN_PAIRS)
    assert (generous, tight) == (541, MIN_PAIRS)

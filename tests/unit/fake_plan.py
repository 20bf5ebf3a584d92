"""A sealed plan whose one arm runs the fake backend on the embedded model: a real (non-dry) reproduce,
ledger entry included, in seconds. Built from the smoke plan's header (model, claim, prompts), so the
pinned hashes are written once, in prereg/smoke/plan.toml."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner

from capsule.cli import cli

REPO = Path(__file__).resolve().parents[2]
PLAN_NAME = "fakeplan"
PLAN_DIR = Path("prereg") / PLAN_NAME

_ARM_AND_VERDICT = """
[[arms]]
name = "fake-a"
description = "The fake backend on the embedded model's tokenizer: the pipeline, not the model."
backend = "fake"
subset = "first8"
dtype = "float32"
batch_size = 4
batch_order = "file"
seed = 0
max_new_tokens = 16
thinking = "off"
unclosed = "empty"
backend_options = {}
env = {}
[arms.decoding]
mode = "greedy"
temperature = 0.0
top_p = 1.0
top_k = 0
min_p = 0.0
presence_penalty = 0.0
repetition_penalty = 1.0

[verdict]
arm = "fake-a"
metric = "card_avg_strict"
interval = "bootstrap"
confidence = 0.95
min_n = 8
bootstrap_resamples = 1000
bootstrap_seed = 0
min_pairs = 50
"""


def write_and_seal_fake_plan(root: Path) -> Path:
    """Write prereg/fakeplan/ under `root` (the working directory) and seal it in root's ledger."""
    smoke = (root / "prereg" / "smoke" / "plan.toml").read_text(encoding="utf-8")
    header = smoke.split("# ---- greedy arms")[0]
    directory = root / PLAN_DIR
    directory.mkdir(parents=True)
    (directory / "plan.toml").write_text(header.replace('name = "smoke"', f'name = "{PLAN_NAME}"', 1)
                                         + _ARM_AND_VERDICT, encoding="utf-8")
    (directory / "rationale.md").write_text("Crash and lock tests of the capsule itself.\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["prereg", "seal", str(PLAN_DIR), "--note", "test plan"])
    assert result.exit_code == 0, result.output + result.stderr
    return directory


def capsule_process(
    args: list[str], cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """`python -m capsule ARGS` in a child process, importing this checkout's code."""
    child_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "capsule", *args], cwd=cwd, env=child_env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )

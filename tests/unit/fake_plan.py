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

def fake_arm(name: str, options: str = "", batch: int = 4) -> str:
    """One fake-backend arm on the first 8 prompts, greedy, 16 tokens; `options` its backend_options."""
    return f"""
[[arms]]
name = "{name}"
description = "The fake backend on the embedded model's tokenizer: the pipeline, not the model."
backend = "fake"
subset = "first8"
dtype = "float32"
batch_size = {batch}
batch_order = "file"
seed = 0
max_new_tokens = 16
thinking = "off"
unclosed = "empty"
backend_options = {{ {options} }}
env = {{}}
[arms.decoding]
mode = "greedy"
temperature = 0.0
top_p = 1.0
top_k = 0
min_p = 0.0
presence_penalty = 0.0
repetition_penalty = 1.0
"""


def fake_verdict(arm: str) -> str:
    """The verdict table on `arm`: the embedded claim's reading, 8 prompts, 1000 resamples."""
    return f"""
[verdict]
arm = "{arm}"
metric = "card_avg_strict"
interval = "bootstrap"
confidence = 0.95
min_n = 8
bootstrap_resamples = 1000
bootstrap_seed = 0
min_pairs = 50
"""


_ARM_AND_VERDICT = fake_arm("fake-a") + fake_verdict("fake-a")


def write_and_seal_fake_plan(root: Path, body: str = _ARM_AND_VERDICT) -> Path:
    """Write prereg/fakeplan/ under `root` (the working directory) and seal it in root's ledger,
    trusting a signing key made now in the default key directory (so every process signs with it).
    `body`: the arms, controls, comparisons and verdict (default: one fake arm and its verdict)."""
    from capsule.evidence.signing import (
        PRIVATE_KEY_NAME,
        default_key_dir,
        fingerprint_of,
        generate_keypair,
        load_signing_key,
    )

    key = default_key_dir() / PRIVATE_KEY_NAME
    if key.exists():
        signer = fingerprint_of(load_signing_key(key)[0].public_key)
    else:
        signer = generate_keypair().fingerprint
    smoke = (root / "prereg" / "smoke" / "plan.toml").read_text(encoding="utf-8")
    header = smoke.split("# ---- greedy arms")[0]
    directory = root / PLAN_DIR
    directory.mkdir(parents=True)
    (directory / "plan.toml").write_text(header.replace('name = "smoke"', f'name = "{PLAN_NAME}"', 1)
                                         + body + f'\n[evidence]\nsigners = ["{signer}"]\n',
                                         encoding="utf-8")
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

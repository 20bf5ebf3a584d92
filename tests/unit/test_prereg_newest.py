"""`capsule prereg newest --model M`: the ledger's newest sealed plan of a model that no amendment
supersedes (what the GPU image's `reproduce` runs without --plan)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from capsule.cli import cli
from capsule.prereg.sealing import amend_plan

REPO = Path(__file__).resolve().parents[2]
MODEL = "InternScience/Agents-A1-4B"


def _newest(ledger: Path, model: str = MODEL) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["prereg", "newest", "--model", model, "--ledger", str(ledger)])
    return result.exit_code, result.output


def test_newest_gpu_plan_is_the_unsuperseded_amendment_and_follows_a_new_one(tmp_path: Path) -> None:
    assert _newest(REPO / "prereg" / "ledger.jsonl") == (0, "prereg/agents-a1-4b-v3\n")
    shutil.copytree(REPO / "prereg", tmp_path / "prereg")
    ledger = tmp_path / "prereg" / "ledger.jsonl"
    new = tmp_path / "prereg" / "agents-a1-4b-vx"
    shutil.copytree(tmp_path / "prereg" / "agents-a1-4b-v3", new)
    text = (new / "plan.toml").read_text()
    old_amends = 'amends = "prereg/agents-a1-4b-v2/plan.toml"'
    assert old_amends in text
    text = text.replace(old_amends, 'amends = "prereg/agents-a1-4b-v3/plan.toml"')
    start = text.index("amend_reason = ")
    text = text[:start] + 'amend_reason = "test"' + text[text.index("\n", start) :]
    (new / "plan.toml").write_text(text)
    amend_plan(new / "plan.toml", tmp_path / "prereg" / "agents-a1-4b-v3" / "plan.toml", "test", ledger)
    code, out = _newest(ledger)
    assert (code, out) == (0, "prereg/agents-a1-4b-vx\n"), out


def test_a_model_without_a_sealed_plan_is_one_error_line_exit_2() -> None:
    code, out = _newest(REPO / "prereg" / "ledger.jsonl", "nobody/none")
    assert code == 2 and out.count("\n") == 1 and out.startswith("Error:")

"""`capsule reproduce --plan P --probe 1` with the real embedded model: every arm starts, generates
and scores on one prompt, the run is signed but never appended, nothing goes into results/, and the
output ends with the full study's cost recomputed from the step times and loads it measured.

P is the embedded plan's two transformers arms at batch 16 (fp32 and bf16) with the controls and
comparisons among them, sealed in a copy of prereg/ in a temporary repository root, so that the
test loads no vLLM engine and the tracked ledger is never touched.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.evidence.verify import verify_run

pytestmark = pytest.mark.slow

KEPT_ARMS = ("hf-fp32-b16", "hf-bf16-b16")


def _probe_plan(embedded: Path, out: Path) -> None:
    """The embedded plan's `KEPT_ARMS`, the controls and comparisons among them, its verdict on the
    first; written with its rationale and controls into `out`."""
    text = (embedded / "plan.toml").read_text()
    head, *blocks = re.split(r"(?m)^(?=\[\[|\[verdict\])", text)

    def kept(block: str) -> bool:
        name = re.search(r'(?m)^name = "(.*)"', block)
        if block.startswith("[[arms]]"):
            return name is not None and name.group(1) in KEPT_ARMS
        arms = re.search(r"(?m)^arms = \[(.*)\]", block)
        return arms is None or all(a.strip().strip('"') in KEPT_ARMS for a in arms.group(1).split(","))

    head = re.sub(r'(?m)^name = ".*"', 'name = "probe-check"', head, count=1)
    head = re.sub(r"(?m)^(amends|amend_reason) = .*\n", "", head)
    plan = head + "".join(b for b in blocks if kept(b))
    plan = re.sub(r'(?m)^arm = ".*"', f'arm = "{KEPT_ARMS[0]}"', plan)
    plan = re.sub(r"(?m)^min_n = \d+", "min_n = 64", plan)
    out.mkdir()
    (out / "plan.toml").write_text(plan)
    shutil.copy(embedded / "rationale.md", out / "rationale.md")
    shutil.copytree(embedded / "controls", out / "controls")


def test_probe_runs_every_arm_on_one_prompt_and_prices_the_study_from_what_it_measured(
    repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedded_model_dir: Path
) -> None:
    shutil.copytree(repo_root / "prereg", tmp_path / "prereg")
    _probe_plan(tmp_path / "prereg" / "smollm2-135m-v3", tmp_path / "prereg" / "probe-check")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
    sealed = CliRunner().invoke(cli, ["prereg", "seal", "prereg/probe-check", "--note", "the probe test"])
    assert sealed.exit_code == 0, sealed.output
    ledger = (tmp_path / "prereg" / "ledger.jsonl").read_bytes()

    result = CliRunner().invoke(
        cli, ["reproduce", "--plan", "prereg/probe-check", "--probe", "1", "--no-progress"]
    )

    assert result.exit_code == 0, result.output + result.stderr
    assert (tmp_path / "prereg" / "ledger.jsonl").read_bytes() == ledger
    assert not (tmp_path / "results").exists()
    (run,) = (tmp_path / "runs" / "probe" / "probe-check").iterdir()
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("PROBE: every arm of the plan on its first 1 prompt(s)")
    assert "from the step times of 2 arm(s) and 2 backend load(s)" in lines[-1]
    assert any(line.startswith("probe-check in full, from this probe's step times") for line in lines)
    record = json.loads((run / "probe.json").read_text())
    assert [a["arm"] for a in record["arms"]] == list(KEPT_ARMS)
    for arm in record["arms"]:
        assert arm["rows"] == 1 and 0 < arm["steps"] <= 64 and arm["seconds"] > 0
    assert [load["backend"] for load in record["loads"]] == ["hf", "hf"]  # one per dtype
    assert record["full_study_minutes"]["expected"] > 0 and record["not_run"] == []
    for arm in KEPT_ARMS:
        assert len((run / "generations" / f"{arm}.jsonl").read_text().splitlines()) == 1
    sources = "\n".join(record["cost_lines"])
    assert "probe-calibrated" in sources or "probe: median step time" in sources
    assert "probe: measured hf" in sources
    assert (run / "RESULTS.md").read_text().split("\n\n")[1].split("\n")[1].startswith("**PROBE:")
    verify_run(run, pubkey=None, ledger_path=None)  # its files and signature hold; it is in no ledger

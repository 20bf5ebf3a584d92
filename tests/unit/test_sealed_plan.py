"""One way to open a sealed plan (issue 39, item 1): `reproduce`, `generate`, `doctor` and `plan cost`
open a plan through `open_sealed_plan` against the ledger they are given, so a tampered ledger, an
unsealed plan or another `--ledger` is refused the same way by each."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner, Result

from capsule.cli import cli

REPO = Path(__file__).resolve().parents[2]
PLAN = "prereg/smoke-v2"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _tamper(ledger: Path) -> None:
    """Edit one entry's note in place: the line no longer hashes to the hash it carries."""
    lines = ledger.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"note":"', '"note":"X', 1)
    ledger.write_text("".join(lines))


COMMANDS = {
    "generate": ["generate", "--plan", PLAN, "--arm", "hf-fp32-b1", "--dry-run", "--no-progress"],
    "reproduce": ["reproduce", "--plan", PLAN, "--dry-run", "--no-progress"],
    "plan cost": ["plan", "cost", PLAN, "--gpu", "h200"],
}


def test_every_command_refuses_a_tampered_ledger(repo_copy: Path) -> None:
    ledger = repo_copy / "prereg" / "ledger.jsonl"
    _tamper(ledger)
    for name, args in COMMANDS.items():
        result = _invoke(*args)
        assert result.exit_code in (2, 3) and "seq 1" in result.stderr, (name, result.output, result.stderr)
        assert "Traceback" not in result.output + result.stderr, name
    doctor = _invoke("doctor", "--plan", PLAN)
    assert doctor.exit_code == 2 and re.search(r"MISSING\s+seal: .*seq 1", doctor.output), doctor.output
    assert not (repo_copy / "runs").exists() and not (repo_copy / "results").exists()


def test_generate_takes_the_ledger_it_is_given(repo_copy: Path) -> None:
    """`generate --ledger`: the plan is checked against that ledger (an empty one seals nothing)."""
    elsewhere = repo_copy / "prereg" / "empty.jsonl"
    elsewhere.write_text("")
    args = [*COMMANDS["generate"], "--ledger", str(elsewhere)]
    result = _invoke(*args)
    assert result.exit_code == 3 and "not sealed" in result.stderr, result.output + result.stderr
    ok = _invoke(*COMMANDS["generate"], "--ledger", str(repo_copy / "prereg" / "ledger.jsonl"))
    assert ok.exit_code == 0, ok.output + ok.stderr


def test_generate_refuses_a_plan_edited_after_sealing(repo_copy: Path) -> None:
    plan = repo_copy / PLAN / "plan.toml"
    plan.write_bytes(plan.read_bytes() + b"# edited after sealing\n")
    result = _invoke(*COMMANDS["generate"])
    assert result.exit_code == 3 and "changed after it was recorded" in result.stderr, result.stderr


def test_no_module_but_the_opener_checks_a_seal() -> None:
    """`check_sealed` is called in one place: every command reaches it through `open_sealed_plan`."""
    callers = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "capsule").rglob("*.py"))
        if path.name != "sealed_plan.py" and "check_sealed(" in path.read_text()
    ]
    openers = {
        str(path.relative_to(REPO))
        for path in sorted((REPO / "capsule").rglob("*.py"))
        if "open_sealed_plan(" in path.read_text() and path.name != "sealed_plan.py"
    }
    assert callers == []
    assert openers == {
        "capsule/pipeline/reproduce.py", "capsule/generation/targets.py", "capsule/costing/pricing.py",
        "capsule/machine/doctor_facts.py",
    }

"""The options several commands share are declared once (`capsule/commands/options.py`), and the
embedded default plan is stated once (`capsule/prereg/default_plan.txt`), read by the capsule and the
Makefile alike (issue 29)."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.commands.options import ledger_option
from capsule.errors import BadInputError
from capsule.prereg.default_plan import DEFAULT_PLAN_FILE, default_plan

ROOT = Path(__file__).resolve().parents[2]
SHARED_FLAGS = ("--ledger", "--plan", "--results", "--endpoint", "--endpoint-key-env")


def flags_declared(source: str) -> set[str]:
    """The shared flags a module's source spells as a whole string (how click declares an option)."""
    return {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and node.value in SHARED_FLAGS
    }


def test_each_shared_option_is_declared_in_the_options_module_only() -> None:
    elsewhere = {
        str(path.relative_to(ROOT)): sorted(found)
        for path in sorted((ROOT / "capsule").rglob("*.py"))
        if path.name != "options.py" and (found := flags_declared(path.read_text(encoding="utf-8")))
    }
    assert not elsewhere, f"declare these options with capsule.commands.options: {elsewhere}"
    assert flags_declared('click.option("--ledger", "ledger_path")') == {"--ledger"}  # the check can fail


def test_the_default_plan_is_stated_once() -> None:
    stated = default_plan().as_posix()
    assert (ROOT / stated / "plan.toml").is_file()
    mentions = [
        str(path.relative_to(ROOT))
        for path in [ROOT / "Makefile", *sorted((ROOT / "capsule").rglob("*.py"))]
        if stated in path.read_text(encoding="utf-8")
    ]
    assert not mentions, f"read the default plan from {DEFAULT_PLAN_FILE.name}, don't spell it: {mentions}"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_reproduce_runs_the_default_plan() -> None:
    shown = subprocess.run(
        ["make", "-n", "--no-print-directory", "reproduce"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout
    assert f"capsule reproduce --plan {default_plan().as_posix()}\n" in shown


@pytest.mark.parametrize("command", [["reproduce"], ["doctor"]])
def test_commands_show_the_default_plan(command: list[str]) -> None:
    shown = " ".join(CliRunner().invoke(cli, [*command, "--help"]).output.split())
    assert f"[default: {default_plan().as_posix()}]" in shown


def test_a_ledger_that_is_a_directory_is_one_error_for_every_command(tmp_path: Path) -> None:
    @click.command()
    @ledger_option()
    def show(ledger_path: Path) -> None:
        click.echo(ledger_path)

    refused = CliRunner().invoke(show, ["--ledger", str(tmp_path)])
    assert isinstance(refused.exception, BadInputError) and "is not a file" in str(refused.exception)
    assert CliRunner().invoke(show, ["--ledger", str(tmp_path / "new.jsonl")]).exit_code == 0
    run = str(tmp_path)
    for command in (["verify", run], ["prereg", "verify"], ["compare", run, run]):
        result = CliRunner().invoke(cli, [*command, "--ledger", str(tmp_path)])
        assert result.exit_code == 2 and result.stderr.count("Error:") == 1, result.stderr
        assert "is not a file (a directory); give --ledger the path of ledger.jsonl" in result.stderr

"""The CLI: every command listed, errors as one `Error:` line with the right exit code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import COMMANDS, cli


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def test_each_command_has_one_line_help() -> None:
    for name in COMMANDS:
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0, result.output
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.get_short_help_str(limit=200).strip()


def test_hash_mismatch_exits_3_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPSULE_CACHE", str(tmp_path / "cache"))
    bogus = tmp_path / "prompts.jsonl"
    bogus.write_text("{}\n")
    result = CliRunner().invoke(cli, ["fetch", "prompts", "--prompts", str(bogus)])
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bogus}: sha256 ")


def test_missing_prompts_file_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPSULE_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(cli, ["fetch", "prompts", "--prompts", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and "not found" in result.stderr


def test_debug_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPSULE_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(
        cli, ["--debug", "fetch", "prompts", "--prompts", str(tmp_path / "nope.jsonl")]
    )
    assert result.exit_code != 0
    assert result.exception is not None and type(result.exception).__name__ == "BadInputError"


def test_python_dash_m_capsule_and_light_start() -> None:
    code = (
        "import sys, capsule.cli; capsule.cli.cli.main(['--help'], standalone_mode=False); "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().endswith("False"), "capsule --help must not import torch"
    version = subprocess.run(
        [sys.executable, "-m", "capsule", "--version"], capture_output=True, text=True, check=True
    )
    assert "capsule" in version.stdout

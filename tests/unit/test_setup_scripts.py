"""`make setup`'s scripts without network: torch's `+cpu` build comes from a local wheel where pip's
find-links has one (no index added, so nothing changes here) and from the PyTorch CPU index only
where it has none; a missing or wrong python3.11 and another platform are one `Error:` line each."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "scripts" / "torch_source.sh"
SETUP = REPO / "scripts" / "setup.sh"
INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def _bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PIP_CONFIG_FILE": os.devnull}
    return subprocess.run(
        ["bash", "-c", script], cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def _torch_version() -> str:
    line = next(
        x for x in (REPO / "requirements" / "cpu.lock").read_text().splitlines() if x.startswith("torch==")
    )
    return line.split("==")[1].split()[0]


def test_torch_index_is_added_only_when_no_local_wheel_is_found(tmp_path: Path) -> None:
    call = f"source {SOURCE}; torch_source_args python3 requirements/cpu.lock"
    assert "+cpu" in _torch_version()
    assert _bash(call, {"PIP_FIND_LINKS": str(tmp_path)}).stdout.strip() == INDEX
    (tmp_path / f"torch-{_torch_version()}-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    assert _bash(call, {"PIP_FIND_LINKS": f"/nowhere file://{tmp_path}"}).stdout.strip() == ""
    other = _bash(
        call, {"PIP_FIND_LINKS": str(tmp_path), "CAPSULE_TORCH_INDEX": "https://mirror.example/cpu"}
    )
    assert other.stdout.strip() == ""  # the local wheel still wins
    elsewhere = _bash(call, {"PIP_FIND_LINKS": "", "CAPSULE_TORCH_INDEX": "https://mirror.example/cpu"})
    assert elsewhere.stdout.strip() == "--extra-index-url https://mirror.example/cpu"
    assert _bash(call, {"PIP_NO_INDEX": "1"}).stdout.strip() == ""  # the image build: find-links only


def test_setup_hands_pip_the_index_only_without_a_local_wheel(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(SETUP, scripts / "setup.sh")
    shutil.copy(SOURCE, scripts / "torch_source.sh")
    (scripts / "setup_cpu_venv.sh").write_text('echo "index=${PIP_EXTRA_INDEX_URL:-none} args=$*"\n')
    call = f"bash {scripts / 'setup.sh'} {sys.executable} .venv-x"
    result = _bash(call, {"PIP_FIND_LINKS": str(tmp_path / "empty")})
    assert result.returncode == 0, result.stderr
    assert f"index=https://download.pytorch.org/whl/cpu args={sys.executable} .venv-x" in result.stdout
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / f"torch-{_torch_version()}-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    result = _bash(call, {"PIP_FIND_LINKS": str(tmp_path / "wheels")})
    assert result.stdout.strip() == f"index=none args={sys.executable} .venv-x"  # here: nothing changes


@pytest.mark.parametrize(
    ("python", "env", "message"),
    [
        ("/nonexistent/python3.11", {}, "not found; install Python 3.11"),
        ("python3.999", {}, "not found; install Python 3.11"),
        ("python3", {"CAPSULE_PLATFORM": "Darwin-arm64"}, "covers Linux x86-64 only"),
    ],
)
def test_setup_refuses_in_one_line_before_installing(
    tmp_path: Path, python: str, env: dict[str, str], message: str
) -> None:
    result = _bash(f"bash {SETUP} {python} {tmp_path / 'venv'}", env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error:") and message in result.stderr
    assert not (tmp_path / "venv").exists()


def test_setup_refuses_a_python_that_is_not_3_11(tmp_path: Path) -> None:
    fake = tmp_path / "python3.11"
    fake.write_text("#!/usr/bin/env bash\nexit 1\n")  # answers the version check with "not 3.11"
    fake.chmod(0o755)
    result = _bash(f"bash {SETUP} {fake} {tmp_path / 'venv'}", {})
    assert result.returncode == 2 and "is not Python 3.11" in result.stderr

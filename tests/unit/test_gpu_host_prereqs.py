"""`make all` checks a GPU host before installing anything (`scripts/gpu_host_prereqs.py`): one line
per prerequisite, exit 2 naming what is missing; each check against the fact that breaks it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import urllib.error
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    path = ROOT / "scripts" / "gpu_host_prereqs.py"
    spec = importlib.util.spec_from_file_location("gpu_host_prereqs", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


prereqs = _script()


def test_the_locked_torch_needs_cuda_13_and_an_old_driver_is_named_with_the_one_needed() -> None:
    assert prereqs.locked_cuda() == "13.0"
    old = prereqs.check_driver("12.8", "13.0")
    assert not old.ok and "R580" in old.detail and "CUDA 12.8" in old.detail
    assert prereqs.check_driver("13.1", "13.0").ok
    absent = prereqs.check_driver(None, "13.0")
    assert not absent.ok and "no NVIDIA driver" in absent.detail


def test_python_must_be_3_11_with_venv_and_headers(tmp_path: Path) -> None:
    assert not prereqs.check_python((3, 12))[0].ok
    (tmp_path / "Python.h").write_text("")
    python, headers = prereqs.check_python((3, 11), str(tmp_path), has_venv=True)
    assert python.ok and headers.ok
    python, headers = prereqs.check_python((3, 11), str(tmp_path / "none"), has_venv=False)
    assert not python.ok and "python3.11-venv" in python.detail
    assert not headers.ok and "python3.11-dev" in headers.detail


def test_compiler_disk_and_index() -> None:
    assert not prereqs.check_compiler(lambda _name: None).ok
    assert prereqs.check_compiler(lambda name: f"/usr/bin/{name}").detail == "/usr/bin/g++"
    low = prereqs.check_disk(ROOT, 29 << 30, free=5 << 30)
    assert not low.ok and "5 GiB free" in low.detail and "need about 29 GiB" in low.detail
    assert prereqs.check_disk(ROOT, 1, free=2).ok

    def unreachable(_url: str) -> object:
        raise urllib.error.URLError("no route to host")

    down = prereqs.check_index("https://pypi.org/simple/pip/", unreachable)
    assert not down.ok and "PIP_INDEX_URL" in down.detail
    assert prereqs.check_index("https://mirror.example/simple/pip/", lambda _url: object()).ok


def test_one_line_each_and_exit_2_naming_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(prereqs, "driver_cuda_version", lambda: "12.8")
    monkeypatch.setattr(prereqs, "check_compiler", lambda: prereqs.Check("compiler", True, "/usr/bin/g++"))
    assert prereqs.main(["--models", str(tmp_path), "--installed"]) == 2
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [line.split()[1] for line in lines] == ["python", "headers", "compiler", "driver", "disk"]
    assert lines[3].startswith("MISSING driver") and "R580" in lines[3]
    assert err.startswith("Error:") and "(driver)" in err and "nothing was installed" in err


def test_make_all_checks_the_host_before_it_installs_anything() -> None:
    dry = subprocess.run(["make", "-n", "all"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    lines = dry.splitlines()
    check = next(i for i, line in enumerate(lines) if "gpu_host_prereqs.py" in line)
    installs = [i for i, line in enumerate(lines) if "pip install" in line or "-m venv" in line]
    install = installs[0] if installs else len(lines)
    assert check < install

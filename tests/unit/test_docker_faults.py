"""The docker scripts' faults, without Docker: no client, no engine, no debootstrap, no Debian mirror,
a lock whose hash the served file does not match. Each is one `Error:` line naming the fix, exit 2.

The scripts run with a PATH holding only the tools they need (and, per test, fakes), so whatever this
machine has installed (docker.io, debootstrap) cannot leak in.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("bash", "sh", "id", "cat", "mkdir", "rm", "curl", "sleep", "seq", "date", "grep", "find", "wc",
         "dirname", "du", "cut", "basename", "sort")


def _path_with(tmp_path: Path, fakes: dict[str, str]) -> dict[str, str]:
    """An environment whose PATH holds links to TOOLS, this interpreter as `python3`, and `fakes`
    (name: shell script body), nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is not None:
            (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").symlink_to(sys.executable)
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "CAPSULE_DOCKER_ROOT": str(tmp_path / "engine")}


def _script(name: str, *args: str, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "docker" / name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    """Exit 2, no traceback, and stderr's last line the `Error:` naming `expected`."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and expected in last, result.stderr


def test_no_docker_client(tmp_path: Path) -> None:
    _one_error(_script("engine.sh", "start", env=_path_with(tmp_path, {})), "apt-get install docker.io")


def test_no_engine_and_no_dockerd(tmp_path: Path) -> None:
    env = _path_with(tmp_path, {"docker": "exit 1"})  # a client that reaches no engine anywhere
    _one_error(_script("engine.sh", "start", env=env), "dockerd is not installed (apt-get install docker.io)")


def test_build_without_an_engine_names_the_command_that_starts_one(tmp_path: Path) -> None:
    env = _path_with(tmp_path, {"docker": "exit 1"})
    result = _script("build-image.sh", "docker/Dockerfile.cpu", "requirements/cpu.lock", "x:y", env=env)
    _one_error(result, "bash docker/engine.sh start")


def test_no_debootstrap(tmp_path: Path) -> None:
    expected = "apt-get install debootstrap" if os.getuid() == 0 else "debootstrap needs root"
    _one_error(_script("build-base.sh", env=_path_with(tmp_path, {"docker": "exit 0"})), expected)


@pytest.mark.skipif(os.getuid() != 0, reason="build-base.sh asks for root before it looks for a mirror")
def test_no_debian_mirror(tmp_path: Path) -> None:
    env = {**_path_with(tmp_path, {"docker": "exit 0", "debootstrap": "exit 0"}),
           "CAPSULE_DEBIAN_MIRROR": "http://127.0.0.1:9/debian"}  # port 9 (discard): nothing listens
    _one_error(_script("build-base.sh", env=env), "set CAPSULE_DEBIAN_MIRROR to one that is")


def _wheel(directory: Path) -> Path:
    """A minimal valid wheel of a package named capsule-fault-probe 1.0."""
    path = directory / "capsule_fault_probe-1.0-py3-none-any.whl"
    info = "capsule_fault_probe-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: capsule-fault-probe\nVersion: 1.0\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_a_served_file_whose_hash_the_lock_does_not_name_is_refused(tmp_path: Path) -> None:
    """The index (here a find-links folder) serves a file for the pin, but not the one the lock's
    sha256 names: pip refuses it, nothing is staged, and the script stops before any build."""
    served = tmp_path / "index"
    served.mkdir()
    wheel = _wheel(served)
    actual = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock = tmp_path / "probe.lock"
    lock.write_text(f"capsule-fault-probe==1.0 \\\n    --hash=sha256:{'0' * 64}\n")
    env = {**_path_with(tmp_path, {}), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(served),
           "PIP_CONFIG_FILE": os.devnull}
    wheels = tmp_path / "wheels"
    result = _script("stage-wheels.sh", str(lock), str(wheels), str(tmp_path / "cache"), env=env)
    _one_error(result, f"staged 0 wheels of 1 in {lock}")
    assert "DO NOT MATCH THE HASHES" in result.stdout and actual in result.stdout
    assert not list(wheels.iterdir())

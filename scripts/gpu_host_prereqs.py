"""`make all`'s first step: what a GPU host must have before the locked GPU stack is installed, one
line each, checked before anything is installed (exit 2 when something is missing).

Run by the host's own python3.11 with nothing installed (standard library only, plus the capsule's
driver rule from `capsule/machine/gpu.py`, which imports nothing outside the standard library):

    python3.11 scripts/gpu_host_prereqs.py [--models DIR] [--installed]

Checked: Python 3.11 with its C headers (building the locked stack's source packages needs them), a
C++ compiler, an NVIDIA driver whose CUDA version reaches the CUDA build of the locked torch
(read from `docker/requirements.lock`'s nvidia-cuda-runtime pin), free disk for the GPU stack and
the weights, and the package index (not needed with `--installed`: the stack is already in place).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import re
import shutil
import sys
import sysconfig
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from capsule.machine.gpu import driver_problem  # noqa: E402 - the checkout's capsule, not installed

GPU_LOCK = ROOT / "docker" / "requirements.lock"
STACK_BYTES = 20 << 30  # .venv-gpu: torch (CUDA), vLLM and their CUDA libraries (estimate, not measured)
WEIGHTS_BYTES = 9 << 30  # Agents-A1-4B in bf16: 7.5 GiB of weights (capsule doctor's arithmetic) + configs
INDEX_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Check:
    """One line: what was checked, whether it holds, and the fact or the fix."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        """`ok      python  3.11.9` or `MISSING compiler  no g++ or c++ on PATH; install ...`."""
        return f"{'ok' if self.ok else 'MISSING':<8}{self.name:<10}{self.detail}"


def check_python(
    version: tuple[int, int] | None = None, include: str | None = None, has_venv: bool | None = None
) -> list[Check]:
    """Python 3.11 (the image's, and the lock's), its venv module (ensurepip) and its C headers."""
    major, minor = version or sys.version_info[:2]
    if (major, minor) != (3, 11):
        return [Check("python", False,
                      f"this is Python {major}.{minor}; run make all with python3.11 on PATH")]
    headers = Path(include or sysconfig.get_paths()["include"]) / "Python.h"
    venv = importlib.util.find_spec("ensurepip") is not None if has_venv is None else has_venv
    return [
        Check("python", venv, f"{major}.{minor}" if venv else f"{major}.{minor} without ensurepip, so "
              "python3.11 -m venv fails; install its venv module (Debian: apt install python3.11-venv)"),
        Check("headers", headers.is_file(), str(headers) if headers.is_file() else
              f"no {headers}; install the Python 3.11 development headers "
              "(Debian: apt install python3.11-dev)"),
    ]


def check_compiler(which: Callable[[str], str | None] = shutil.which) -> Check:
    """A C++ compiler on PATH (the locked stack builds source packages)."""
    found = which("g++") or which("c++")
    missing = "no g++ or c++ on PATH; install one (Debian: apt install g++)"
    return Check("compiler", found is not None, found or missing)


def locked_cuda(lock: Path = GPU_LOCK) -> str | None:
    """The CUDA version the locked torch is built for: the lock's nvidia-cuda-runtime pin ("13.0")."""
    match = re.search(r"^nvidia-cuda-runtime==(\d+)\.(\d+)", lock.read_text(encoding="utf-8"), re.MULTILINE)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def driver_cuda_version() -> str | None:
    """The CUDA version the installed driver supports, from NVML (libnvidia-ml.so.1), e.g. "12.8";
    None without an NVIDIA driver."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        version = ctypes.c_int()
        if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(version)) != 0:
            return None
        return f"{version.value // 1000}.{version.value % 1000 // 10}"
    finally:
        nvml.nvmlShutdown()


def check_driver(driver_cuda: str | None, torch_cuda: str | None) -> Check:
    """The driver reaches the locked torch's CUDA build (`capsule.machine.gpu.driver_problem`)."""
    if driver_cuda is None:
        return Check("driver", False, "no NVIDIA driver (NVML's libnvidia-ml.so.1 not found or not "
                     "starting); install the NVIDIA driver for this GPU")
    problem = driver_problem(driver_cuda, torch_cuda)
    if problem:
        return Check("driver", False, problem)
    return Check("driver", True, f"supports CUDA {driver_cuda} (the locked torch needs {torch_cuda})")


def check_disk(path: Path, need: int, free: int | None = None) -> Check:
    """Free disk where the GPU stack and the weights go."""
    available = shutil.disk_usage(path).free if free is None else free
    detail = f"{available / (1 << 30):.0f} GiB free at {path}, need about {need / (1 << 30):.0f} GiB"
    return Check("disk", available >= need, detail if available >= need else f"{detail}; free some space")


def check_index(url: str, opener: Callable[[str], object] | None = None) -> Check:
    """The package index answers (pip installs the locked stack from it)."""
    try:
        (opener or (lambda u: urllib.request.urlopen(u, timeout=INDEX_TIMEOUT_S)))(url)
    except (urllib.error.URLError, OSError, ValueError) as error:
        return Check("network", False, f"{url} did not answer ({error}); the stack installs from it: connect "
                     "this host, or set PIP_INDEX_URL to a mirror")
    return Check("network", True, f"{url} answers")


def main(argv: list[str] | None = None) -> int:
    """Print one line per check; 0 when all hold, 2 when any is missing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="where the weights go")
    parser.add_argument("--installed", action="store_true", help="the GPU stack is installed already")
    args = parser.parse_args(argv)
    checks = [*check_python(), check_compiler(), check_driver(driver_cuda_version(), locked_cuda())]
    models = args.models if args.models.exists() else ROOT
    weights = 0 if any(args.models.glob("*/*.safetensors")) else WEIGHTS_BYTES
    checks.append(check_disk(models, (0 if args.installed else STACK_BYTES) + weights))
    if not args.installed:
        index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/")
        checks.append(check_index(index.rstrip("/") + "/pip/"))
    for check in checks:
        print(check.line())
    missing = [check.name for check in checks if not check.ok]
    if missing:
        print(f"Error: this host is not ready for make all ({', '.join(missing)}): fix the lines marked "
              "MISSING above; nothing was installed", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

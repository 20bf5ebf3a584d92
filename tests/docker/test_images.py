"""The checks `make docker-test` runs against the built images (docker/README.md).

Skipped, with the reason, where no Docker engine answers or an image is not built; `make test` does
not build images (CI has no need to on every commit), `make docker-test` builds both and runs these.
- The CPU image runs the smoke study into a bind-mounted checkout copy as a non-root user; the run is
  signed, `capsule verify` accepts it outside the container, and every file it wrote belongs to the
  host user.
- The same plan run outside the container on the same machine gives byte-identical generations (where
  not, the test fails and prints `capsule manifest diff` of the two runs: the candidate causes).
- The GPU image installs and runs everything but the GPU's execution: `--help`, `doctor` on the GPU
  plan reports the missing GPU as one clean line, and the GPU plan's dry run walks every arm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CPU_IMAGE = os.environ.get("CAPSULE_CPU_IMAGE", "capsule-cpu:latest")
GPU_IMAGE = os.environ.get("CAPSULE_GPU_IMAGE", "capsule-gpu:latest")
SMOKE_PLAN = os.environ.get("SMOKE_PLAN", "prereg/smoke-v2")
GPU_PLAN = os.environ.get("GPU_PLAN", "prereg/agents-a1-4b-v2")


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("version", "--format", "{{.Server.Version}}", timeout=15).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _require_image(image: str) -> None:
    if os.environ.get("CAPSULE_DOCKER_TEST") != "1":
        pytest.skip("image checks run under `make docker-test` (CAPSULE_DOCKER_TEST=1), not in `make test`")
    if not _engine_answers():
        pytest.skip("no Docker engine answers (DOCKER_HOST, default socket); `make docker-test` starts one")
    if _docker("image", "inspect", image).returncode != 0:
        pytest.skip(f"image {image} is not built; `make docker-test` builds it")


def _capsule(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "capsule", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=1200,
    )


def _checkout_copy(root: Path) -> Path:
    """A directory shaped like a checkout for the run: prereg/ (plans, ledger) and an empty results/."""
    shutil.copytree(REPO / "prereg", root / "prereg")
    (root / "results").mkdir()
    return root


def _only_run(results: Path) -> Path:
    runs = [path.parent for path in results.glob("*/*/run.json")]
    assert len(runs) == 1, f"expected one run under {results}, found {runs}"
    return runs[0]


@pytest.fixture(scope="module")
def signing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh key pair used inside the container and pinned with --key outside it."""
    directory = tmp_path_factory.mktemp("keys")
    result = _capsule("keygen", "--out", str(directory), cwd=REPO)
    assert result.returncode == 0, result.stderr
    return directory


def test_cpu_image_smoke_run_verifies_outside_and_matches_a_host_run(
    tmp_path: Path, signing_dir: Path
) -> None:
    _require_image(CPU_IMAGE)
    inside = _checkout_copy(tmp_path / "inside")
    start = time.monotonic()
    container = subprocess.run(
        ["bash", str(REPO / "docker" / "run-cpu.sh"), "reproduce", "--plan", SMOKE_PLAN, "--no-progress"],
        cwd=inside, capture_output=True, text=True, timeout=1200,
        env={**os.environ, "CAPSULE_CPU_IMAGE": CPU_IMAGE, "CAPSULE_SIGNING_DIR": str(signing_dir)},
    )
    inside_s = time.monotonic() - start
    assert container.returncode == 0, container.stdout[-3000:] + container.stderr[-3000:]
    run_in = _only_run(inside / "results")

    owner = os.getuid()
    foreign = [str(p) for p in inside.rglob("*") if p.lstat().st_uid != owner]
    assert not foreign, f"files not owned by the host user (uid {owner}): {foreign[:5]}"

    verified = _capsule(
        "verify", str(run_in), "--key", str(signing_dir / "signing.pub.pem"),
        "--ledger", str(inside / "prereg" / "ledger.jsonl"), cwd=inside,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr

    outside = _checkout_copy(tmp_path / "outside")
    start = time.monotonic()
    host = _capsule(
        "reproduce", "--plan", SMOKE_PLAN, "--no-progress", cwd=outside,
        env={"CAPSULE_SIGNING_KEY": str(signing_dir / "signing.key.pem")},
    )
    outside_s = time.monotonic() - start
    assert host.returncode == 0, host.stdout[-3000:] + host.stderr[-3000:]
    run_out = _only_run(outside / "results")

    print(f"\nsmoke study {SMOKE_PLAN}: {inside_s:.0f} s in the CPU image, {outside_s:.0f} s outside")
    inside_files = sorted(p.relative_to(run_in) for p in (run_in / "generations").rglob("*") if p.is_file())
    outside_files = sorted(
        p.relative_to(run_out) for p in (run_out / "generations").rglob("*") if p.is_file()
    )
    assert inside_files == outside_files
    differing = [
        str(name) for name in inside_files
        if name.suffix == ".jsonl" and (run_in / name).read_bytes() != (run_out / name).read_bytes()
    ]
    if differing:
        diff = _capsule(
            "manifest", "diff", str(run_in / "manifest.json"), str(run_out / "manifest.json"), cwd=REPO
        )
        pytest.fail(f"generations differ in and out of the image: {differing}\n{diff.stdout}{diff.stderr}")
    print(f"generations byte-identical inside and outside the image: {len(inside_files)} files")


def test_gpu_image_runs_everything_but_the_gpu() -> None:
    _require_image(GPU_IMAGE)
    help_run = _docker("run", "--rm", "--network=none", GPU_IMAGE, "--help", timeout=300)
    assert help_run.returncode == 0 and "reproduce" in help_run.stdout, help_run.stderr

    doctor = _docker("run", "--rm", "--network=none", GPU_IMAGE, "doctor", "--plan", GPU_PLAN, timeout=600)
    output = doctor.stdout + doctor.stderr
    assert "Traceback" not in output, output[-3000:]
    assert "gpu" in output.lower() and "MISSING" in output, output[-3000:]

    dry = _docker(
        "run", "--rm", "--network=none", GPU_IMAGE, "reproduce", "--plan", GPU_PLAN, "--dry-run",
        "--no-progress", timeout=900,
    )
    assert dry.returncode == 0, (dry.stdout + dry.stderr)[-3000:]
    assert "Traceback" not in dry.stdout + dry.stderr
    arms = [arm["name"] for arm in tomllib.loads((REPO / GPU_PLAN / "plan.toml").read_text())["arms"]]
    missing = [name for name in arms if name not in dry.stdout + dry.stderr]
    assert not missing, f"the dry run did not walk arms {missing}"

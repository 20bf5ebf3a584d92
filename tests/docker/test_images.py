"""The checks `make docker-test` runs against the built images (docker/README.md).

Skipped, with the reason, where no Docker engine answers or an image is not built; `make test` does
not build images (CI has no need to on every commit), `make docker-test` builds both and runs these.
- The CPU image runs the smoke study into a bind-mounted checkout copy as a non-root user; the run is
  signed, `capsule verify` accepts it outside the container, and every file it wrote belongs to the
  host user.
- The same plan run outside the container on the same machine gives the same generations, row for row
  in every field but the timing ones. An arm whose own rerun control failed in either run (its output
  depends on scheduling on this machine) is reported with that reading instead; any other difference
  fails the test and prints `capsule manifest diff` of the two runs: the candidate causes.
- The GPU image installs and runs everything but the GPU's execution: `--help`, `doctor` on the GPU
  plan reports the missing GPU as one clean line, and the GPU plan's dry run walks every arm.
"""

from __future__ import annotations

import json
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
GPU_IMAGE = os.environ.get("CAPSULE_GPU_IMAGE", "capsule:latest")
SMOKE_PLAN = os.environ.get("SMOKE_PLAN", "prereg/smoke-v2")
GPU_PLAN = os.environ.get("GPU_PLAN", "prereg/agents-a1-4b-v3")


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


def _run_named_container(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `command` (docker/run-cpu.sh) with its container named; on a timeout kill that container
    before failing, so a stuck study does not keep running (and spinning both cores) after the test."""
    name = f"capsule-test-{os.getpid()}-{int(time.time())}"
    try:
        return subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
            env={**env, "CAPSULE_CONTAINER_NAME": name},
        )
    except subprocess.TimeoutExpired:
        killed = _docker("kill", name, timeout=60)
        pytest.fail(
            f"the container did not finish in {timeout:.0f} s; `docker kill {name}`: "
            f"{'done' if killed.returncode == 0 else killed.stderr.strip()}"
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
    container = _run_named_container(
        ["bash", str(REPO / "docker" / "run-cpu.sh"), "reproduce", "--plan", SMOKE_PLAN, "--no-progress"],
        cwd=inside, timeout=1200,
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
    inside_arms = sorted(p.stem for p in (run_in / "generations").glob("*.jsonl"))
    assert inside_arms == sorted(p.stem for p in (run_out / "generations").glob("*.jsonl"))
    identical, scheduling, unexplained = compare_generations(run_in, run_out)
    print(
        f"generations inside vs outside the image: {len(identical)} of {len(inside_arms)} arms identical in "
        f"every field but the timing ones ({', '.join(TIMING_FIELDS)})"
    )
    for arm, note in scheduling.items():
        print(f"  {arm}: {note}")
    if unexplained:
        diff = _capsule(
            "manifest", "diff", str(run_in / "manifest.json"), str(run_out / "manifest.json"), cwd=REPO
        )
        pytest.fail(f"generations differ in and out of the image: {unexplained}\n{diff.stdout}{diff.stderr}")


def test_cpu_image_reproduce_into_a_mounted_study_directory_verifies_outside(
    tmp_path: Path, signing_dir: Path
) -> None:
    """`docker run -v "$PWD/study:/home/capsule/study" capsule-cpu reproduce` as docs/docker.md writes
    it: refused in one line without the volume; with it, the image's plans and ledger are copied into
    the empty study directory, the run is signed with study/keys/signing.key.pem, and it verifies
    outside the container against the study's ledger."""
    _require_image(CPU_IMAGE)
    # under vfs, creating and removing a container copies the whole image: minutes on a busy host
    bare = _docker("run", "--rm", "--network=none", CPU_IMAGE, "reproduce", timeout=900)
    print(f"\n$ docker run --rm capsule-cpu reproduce\n{bare.stderr.strip()} (exit {bare.returncode})")
    assert bare.returncode == 2 and bare.stderr.startswith("Error: no study volume"), bare.stderr
    assert bare.stderr.count("\n") == 1 and "--gpus" not in bare.stderr
    study = tmp_path / "study"
    (study / "keys").mkdir(parents=True)
    shutil.copy(signing_dir / "signing.key.pem", study / "keys" / "signing.key.pem")
    if os.getuid() == 0:  # on a root host the container user is uid 1000 (otherwise the host's)
        for path in (study, study / "keys", study / "keys" / "signing.key.pem"):
            os.chown(path, 1000, 1000)
    start = time.monotonic()
    name = f"capsule-test-study-{os.getpid()}"
    command = [
        "run", "--rm", "--name", name, "--network=none", "--shm-size=2g",
        "-v", f"{study}:/home/capsule/study", CPU_IMAGE, "reproduce", "--plan", SMOKE_PLAN, "--no-progress",
    ]
    try:
        run = _docker(*command, timeout=1200)
    except subprocess.TimeoutExpired:
        _docker("kill", name, timeout=60)
        pytest.fail("the container did not finish in 1200 s (killed)")
    took = time.monotonic() - start
    print(f"$ docker {' '.join(command)}\n... {run.stdout.strip()[-600:]}\n({took:.0f} s)")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "copied the image's sealed plans and ledger" in run.stderr
    produced = _only_run(study / "results")
    verified = _capsule(
        "verify", str(produced), "--key", str(signing_dir / "signing.pub.pem"),
        "--ledger", str(study / "prereg" / "ledger.jsonl"), cwd=study,
    )
    print(f"$ capsule verify {produced.relative_to(tmp_path)} --key ... --ledger study/prereg/ledger.jsonl")
    print(verified.stdout.strip())
    assert verified.returncode == 0, verified.stdout + verified.stderr


#: Row fields that record when and how fast, not what was generated (a server row's `request` holds
#: its send and arrival times): left out of the inside-vs-outside comparison.
TIMING_FIELDS = ("elapsed_s", "request")


def _rows(run: Path, arm: str) -> list[dict[str, object]]:
    lines = (run / "generations" / f"{arm}.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_FIELDS} for line in lines]


def _unstable_arms(run: Path) -> dict[str, str]:
    """Arms whose own rerun control in `run` did not repeat them: their outputs depend on scheduling
    on this machine (a server fed by more clients than its batch), so a difference is not the image's."""
    analysis = json.loads((run / "analysis.json").read_text(encoding="utf-8"))
    unstable: dict[str, str] = {}
    for name, control in (analysis.get("controls") or {}).items():
        if control.get("kind") != "rerun_identity":
            continue
        for pair in control.get("pairs", []):
            if pair["identical_response"] < pair["n_common"]:
                for arm in pair["arms"]:
                    unstable[arm] = (
                        f"control {name} in {run.parent.parent.parent.name}'s run repeated "
                        f"{pair['identical_response']}/{pair['n_common']}"
                    )
    return unstable


def compare_generations(run_a: Path, run_b: Path) -> tuple[list[str], dict[str, str], list[str]]:
    """(arms identical but for timing, differing arms explained by a failed rerun control in either run
    with the control's reading, differing arms nothing in the runs explains)."""
    unstable = {**_unstable_arms(run_b), **_unstable_arms(run_a)}
    identical: list[str] = []
    scheduling: dict[str, str] = {}
    unexplained: list[str] = []
    for path in sorted((run_a / "generations").glob("*.jsonl")):
        arm = path.stem
        a, b = _rows(run_a, arm), _rows(run_b, arm)
        if a == b:
            identical.append(arm)
            continue
        same = sum(x == y for x, y in zip(a, b, strict=False))
        if arm in unstable:
            scheduling[arm] = f"{same}/{len(a)} rows identical; scheduling-dependent: {unstable[arm]}"
        else:
            unexplained.append(f"{arm} ({same}/{len(a)} rows identical)")
    return identical, scheduling, unexplained


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


#: Seconds a bare `docker run` of the GPU image may take: under vfs each run copies the image.
VFS_RUN_TIMEOUT_S = 900


def test_gpu_image_reproduce_refuses_without_a_study_volume_and_without_a_gpu(tmp_path: Path) -> None:
    """`docker run capsule reproduce` as the README writes it, as far as a machine without a GPU goes."""
    _require_image(GPU_IMAGE)
    # under vfs, creating and removing a container copies the whole 11 GB image: minutes on a busy host
    bare = _docker("run", "--rm", "--network=none", GPU_IMAGE, "reproduce", timeout=VFS_RUN_TIMEOUT_S)
    assert bare.returncode == 2 and bare.stderr.startswith("Error: no study volume"), bare.stderr
    assert '-v "$PWD/study:/home/capsule/study"' in bare.stderr and "--gpus all" in bare.stderr
    study = tmp_path / "study"
    study.mkdir()
    study.chmod(0o777)  # the container user (the host's uid, or 1000 for root) writes there
    mounted = _docker(
        "run", "--rm", "--network=none", "-v", f"{study}:/home/capsule/study", GPU_IMAGE, "reproduce",
        timeout=VFS_RUN_TIMEOUT_S,
    )
    assert mounted.returncode == 2 and "no GPU visible" in mounted.stderr and "capsule-cpu" in mounted.stderr
    assert mounted.stderr.count("\n") == 1, mounted.stderr
    helped = _docker(
        "run", "--rm", "--network=none", GPU_IMAGE, "reproduce", "--help", timeout=VFS_RUN_TIMEOUT_S
    )
    assert helped.returncode == 0 and "--plan" in helped.stdout

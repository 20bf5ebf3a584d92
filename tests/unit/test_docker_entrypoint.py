"""docker/entrypoint.sh without Docker: the study volume, the GPU check and the plan it picks, with
the container's paths faked through its environment and a stand-in `capsule` that records its
arguments (so nothing is loaded)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
NEWEST = "prereg/agents-a1-4b-v9"


class Container:
    """A fake container: study dir, mountinfo, /dev, the image's seed copy, a recording `capsule`."""

    def __init__(self, root: Path, kind: str) -> None:
        self.root, self.kind = root, kind
        self.study = root / "home" / "capsule" / "study"
        self.study.mkdir(parents=True)
        self.dev = root / "dev"
        self.dev.mkdir()
        self.seed = root / "opt" / "capsule"
        (self.seed / "prereg" / "p").mkdir(parents=True)
        (self.seed / "prereg" / "ledger.jsonl").write_text("{}\n")
        self.mountinfo = root / "mountinfo"
        self.mounts(["/", "/etc/hostname"])
        self.calls = root / "calls"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        fake = bin_dir / "capsule"
        fake.write_text(
            '#!/usr/bin/env bash\necho "$PWD|$*|${CAPSULE_SIGNING_KEY:-}" >> "$CALLS"\n'
            f'if [ "$1" = prereg ]; then echo {NEWEST}; fi\n'
        )
        fake.chmod(0o755)
        self.path = f"{bin_dir}:{os.environ['PATH']}"

    def mounts(self, points: list[str]) -> None:
        """Write mountinfo lines whose 5th field is each mount point (as the kernel's do)."""
        lines = [f"{i} 1 0:{i} / {point} rw - ext4 /dev/x rw" for i, point in enumerate(points, start=20)]
        self.mountinfo.write_text("\n".join(lines) + "\n")

    def mount_study(self) -> None:
        self.mounts(["/", "/etc/hostname", str(self.study)])

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": self.path,
            "HOME": str(self.root),
            "CALLS": str(self.calls),
            "CAPSULE_STUDY": str(self.study),
            "CAPSULE_IMAGE_KIND": self.kind,
            "CAPSULE_SEED_DIR": str(self.seed),
            "CAPSULE_MOUNTINFO": str(self.mountinfo),
            "CAPSULE_DEV_DIR": str(self.dev),
            "CAPSULE_GPU_MODEL": "InternScience/Agents-A1-4B",
        }
        return subprocess.run(
            ["bash", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, timeout=30
        )

    def called(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture(params=["gpu", "cpu"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Container:
    return Container(tmp_path, request.param)


def test_reproduce_without_a_study_volume_refuses_in_one_line_with_the_flags_before_anything(
    box: Container,
) -> None:
    result = box.run("reproduce")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: no study volume")
    assert f'-v "$PWD/study:{box.study}"' in result.stderr
    assert ("--gpus all" in result.stderr) == (box.kind == "gpu")
    assert box.called() == [] and not (box.study / "prereg").exists()


def test_help_and_other_commands_pass_straight_through(box: Container) -> None:
    assert box.run("reproduce", "--help").returncode == 0
    assert box.run("doctor", "--plan", "prereg/x").returncode == 0
    assert [line.split("|")[1] for line in box.called()] == ["reproduce --help", "doctor --plan prereg/x"]


def test_gpu_image_without_a_visible_gpu_says_use_capsule_cpu(tmp_path: Path) -> None:
    box = Container(tmp_path, "gpu")
    box.mount_study()
    result = box.run("reproduce")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert (
        "no GPU visible" in result.stderr
        and "capsule-cpu" in result.stderr
        and "--plan prereg/" in result.stderr
    )
    assert box.called() == []


def test_gpu_image_with_a_gpu_runs_the_ledgers_newest_plan_in_the_seeded_study(tmp_path: Path) -> None:
    box = Container(tmp_path, "gpu")
    box.mount_study()
    (box.dev / "nvidia0").touch()
    (box.study / "keys").mkdir()
    (box.study / "keys" / "signing.key.pem").write_text("k")
    result = box.run("reproduce", "--no-progress")
    assert result.returncode == 0, result.stderr
    newest, run = box.called()
    assert newest.split("|")[1] == "prereg newest --model InternScience/Agents-A1-4B"
    where, args, key = run.split("|")
    assert where == str(box.study) and args == f"reproduce --plan {NEWEST} --no-progress"
    assert key == str(box.study / "keys" / "signing.key.pem")
    assert (box.study / "prereg" / "ledger.jsonl").read_text() == "{}\n" and (
        box.study / "prereg" / "p"
    ).is_dir()


def test_cpu_image_runs_the_embedded_default_and_a_named_plan_is_kept(tmp_path: Path) -> None:
    box = Container(tmp_path, "cpu")
    box.mounts(["/", str(box.study / "results"), str(box.study / "prereg")])  # make docker-run-cpu's mounts
    (box.study / "prereg").mkdir()
    (box.study / "prereg" / "ledger.jsonl").write_text("mine\n")
    assert box.run("reproduce").returncode == 0
    assert box.run("reproduce", "--plan", "prereg/smoke-v2").returncode == 0
    assert [line.split("|")[1] for line in box.called()] == ["reproduce", "reproduce --plan prereg/smoke-v2"]
    assert (box.study / "prereg" / "ledger.jsonl").read_text() == "mine\n"  # never overwritten


def test_gpu_image_dry_run_needs_neither_a_volume_nor_a_gpu(tmp_path: Path) -> None:
    box = Container(tmp_path, "gpu")
    result = box.run("reproduce", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert box.called()[-1].split("|")[1] == f"reproduce --plan {NEWEST} --dry-run"


def test_any_command_on_a_fresh_study_volume_finds_the_images_plans(tmp_path: Path) -> None:
    box = Container(tmp_path, "gpu")
    box.mount_study()
    result = box.run("fetch", "model", "--plan", "prereg/p")
    assert result.returncode == 0, result.stderr
    (call,) = box.called()
    assert call.split("|")[:2] == [str(box.study), "fetch model --plan prereg/p"]
    assert (box.study / "prereg" / "p").is_dir()


def test_a_mounted_study_volume_gets_the_manifest_schema_the_installed_capsule_reads(tmp_path: Path) -> None:
    """The installed capsule finds manifests/schema.json in its working directory (the study); a mounted
    volume hides the image's copy, so the first use copies it (found running the CPU image here)."""
    box = Container(tmp_path, "cpu")
    (box.seed / "manifests").mkdir()
    (box.seed / "manifests" / "schema.json").write_text("{}\n")
    box.mount_study()
    assert box.run("reproduce", "--plan", "prereg/p").returncode == 0
    assert (box.study / "manifests" / "schema.json").read_text() == "{}\n"
    (box.study / "manifests" / "schema.json").write_text("mine\n")
    assert box.run("reproduce", "--plan", "prereg/p").returncode == 0
    assert (box.study / "manifests" / "schema.json").read_text() == "mine\n"  # never overwritten

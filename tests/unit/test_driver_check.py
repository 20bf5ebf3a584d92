"""A GPU study never runs on the CPU because of an old driver (issue 37, finding 3): the locked torch
is built for CUDA 13 and needs an R580+ driver; with an older one torch sees no GPU, and before this
`capsule doctor` passed and the transformers backend moved the model to the CPU. Tested with the H200
NVML fixture (tests/data/nvml_h200.py) given an older driver."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_manifest_gpu import nvml_h200

from capsule.errors import BadInputError
from capsule.generation.backends import hf
from capsule.machine import doctor, gpu, software
from capsule.machine.gpu import driver_problem
from capsule.prereg.loader import load_plan

REPO = Path(__file__).resolve().parents[2]
GPU_PLAN = REPO / "prereg" / "agents-a1-4b-v3"


def _old_driver() -> object:
    return nvml_h200.FakeNvml(driver_version="550.54.15", cuda_driver_version=12040)


def test_the_rule_names_the_driver_a_cuda_13_torch_needs() -> None:
    assert driver_problem("13.0", "13.0") is None and driver_problem("13.1", "13.0") is None
    assert driver_problem(None, "13.0") is None and driver_problem("12.8", None) is None
    problem = driver_problem("12.8", "13.0")
    assert problem is not None and "R580+" in problem and "CUDA 12.8" in problem


def test_doctor_refuses_the_gpu_study_under_an_old_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          prompts_path: Path) -> None:
    monkeypatch.setattr(gpu, "_import_nvml", _old_driver)
    host = dataclasses.replace(doctor.probe_host(tmp_path), torch_cuda="13.0", vllm="vllm 0.33.0")
    assert host.driver_cuda == "12.4"
    report = doctor.run_doctor(load_plan(GPU_PLAN), host, prompts_path=prompts_path)
    missing = {finding.topic: finding.detail for finding in report.missing}
    assert "driver" in missing and "R580+" in missing["driver"] and "CUDA 12.4" in missing["driver"]


def test_doctor_accepts_the_driver_of_the_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  prompts_path: Path) -> None:
    monkeypatch.setattr(gpu, "_import_nvml", nvml_h200.FakeNvml)  # CUDA 13.0, driver 580
    host = dataclasses.replace(doctor.probe_host(tmp_path), torch_cuda="13.0", vllm="vllm 0.33.0")
    report = doctor.run_doctor(load_plan(GPU_PLAN), host, prompts_path=prompts_path)
    assert "driver" not in {finding.topic for finding in report.missing}


def test_an_arm_without_a_device_is_refused_not_run_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_import_nvml", _old_driver)
    monkeypatch.setattr(software, "torch_build", lambda: {"version": "2.14.0", "cuda": "13.0"})
    with pytest.raises(BadInputError) as refused:
        hf._cpu_or_refuse("hf-run3a-b16")
    message = str(refused.value)
    assert "hf-run3a-b16" in message and "H200" in message and "R580+" in message and "\n" not in message


def test_a_host_without_a_gpu_runs_the_arm_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoNvml:
        def __init__(self) -> None:
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setattr(gpu, "_import_nvml", NoNvml)
    assert hf._cpu_or_refuse("primary") == "cpu"

"""An arm's sealed `env` is set while its backend lives and undone when it closes (every backend)."""

from __future__ import annotations

import os

import pytest

from capsule.generation.backends.arm_env import ArmEnv


def test_env_is_applied_recorded_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPSULE_TEST_KEPT", "before")
    monkeypatch.delenv("CAPSULE_TEST_NEW", raising=False)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    env = ArmEnv({"CAPSULE_TEST_KEPT": "arm", "CAPSULE_TEST_NEW": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    assert os.environ["CAPSULE_TEST_KEPT"] == "arm" and os.environ["CAPSULE_TEST_NEW"] == "1"
    recorded = env.recorded()
    assert recorded["CAPSULE_TEST_NEW"] == "1" and recorded["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    env.restore()
    assert os.environ["CAPSULE_TEST_KEPT"] == "before"
    assert "CAPSULE_TEST_NEW" not in os.environ and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    env.restore()  # a second restore changes nothing
    assert os.environ["CAPSULE_TEST_KEPT"] == "before"

"""The control-kind table: every target resolves to a callable, and each layer reads the table."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import replace

import pytest

from capsule.errors import BadInputError
from capsule.prereg import control_kinds
from capsule.prereg.control_kinds import CONTROL_KINDS, KINDS, control_kind, resolve


@pytest.mark.parametrize("kind", KINDS, ids=[kind.name for kind in KINDS])
def test_every_target_resolves_to_a_function_of_the_right_layer(kind: control_kinds.ControlKind) -> None:
    runner, renderer = resolve(kind.runner), resolve(kind.renderer)
    assert callable(runner) and runner.__module__.startswith("capsule.analysis.")
    assert callable(renderer) and renderer.__module__.startswith("capsule.report.")
    assert list(inspect.signature(runner).parameters) == ["control", "inputs"]
    assert list(inspect.signature(renderer).parameters) == ["control", "analysis"]
    if kind.check is not None:
        check = resolve(kind.check)
        assert check.__module__ == "capsule.prereg.checks"
        assert list(inspect.signature(check).parameters) == ["plan", "where", "control", "arms"]


def test_table_is_consistent() -> None:
    assert len(set(CONTROL_KINDS)) == len(KINDS) == 7
    for kind in KINDS:
        assert {"name", "kind"} <= set(kind.keys) and not set(kind.keys) & set(kind.optional)
        assert 0 <= kind.arms[0] <= kind.arms[1]
    assert control_kind("backend").may_differ == ("backend", "backend_options", "env")
    with pytest.raises(BadInputError, match="known kinds: rerun_identity, batch_size"):
        control_kind("nope")


def test_a_bad_target_fails_loudly() -> None:
    broken = replace(control_kind("backend"), runner="capsule.analysis.controls:no_such_runner")
    with pytest.raises(AttributeError):
        resolve(broken.runner)


def test_the_table_imports_no_layer_above_prereg() -> None:
    code = (
        "import sys, capsule.prereg.control_kinds, capsule.prereg.loader;"
        "print(sorted(m for m in sys.modules if m.startswith(('capsule.analysis', 'capsule.report'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""`capsule.authoring.plan_toml`: the loader reads back exactly the plan the writer wrote."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from capsule.authoring.plan_toml import plan_toml
from capsule.prereg.loader import load_plan, parse_plan


@pytest.mark.parametrize("study", ["smoke", "smollm2-135m", "smollm2-135m-v2", "agents-a1-4b"])
def test_every_sealed_plan_survives_the_writer(repo_root: Path, study: str) -> None:
    plan_file = repo_root / "prereg" / study / "plan.toml"
    plan = load_plan(plan_file)
    assert parse_plan(plan_toml(plan), plan_file) == plan


def test_text_that_needs_escaping_round_trips(repo_root: Path) -> None:
    plan_file = repo_root / "prereg" / "smoke" / "plan.toml"
    plan = load_plan(plan_file)
    awkward = 'a "quoted" claim\\with a backslash,\ta tab, a newline\nand é, ü, \x7f and \x01'
    plan = replace(plan, claim=replace(plan.claim, text=awkward), description="")
    text = plan_toml(plan, header="# a header line")
    assert text.startswith("# a header line\n\nname = ")
    assert "description" not in tomllib.loads(text)  # an unset optional key is left out
    assert parse_plan(text, plan_file) == plan

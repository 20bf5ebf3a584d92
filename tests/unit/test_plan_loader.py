"""Plan loading: the three real plans validate; every kind of mistake is refused with a useful message."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from capsule.errors import BadInputError
from capsule.prereg.control_kinds import CONTROL_KINDS
from capsule.prereg.loader import load_plan
from capsule.prereg.metrics import ALL_METRICS, COMPOSITES, METRICS

PLANS = (
    "smoke", "smoke-v2", "smollm2-135m", "smollm2-135m-v2", "smollm2-135m-v3",
    "agents-a1-4b", "agents-a1-4b-v2", "agents-a1-4b-v3",
)
# plans that declare every control kind (v3 dropped the sampling grid to fit 45 minutes: its rationale);
# those sealed before cross_device existed declare every other kind
EVERY_CONTROL_KIND = (
    "smoke", "smoke-v2", "smollm2-135m", "smollm2-135m-v2", "agents-a1-4b", "agents-a1-4b-v2",
    "agents-a1-4b-v3",
)
BEFORE_CROSS_DEVICE = set(EVERY_CONTROL_KIND) - {"agents-a1-4b-v3"}


@pytest.fixture
def smoke_copy(tmp_path: Path, repo_root: Path) -> Path:
    """A writable copy of prereg/smoke (plan, rationale, controls) in a temporary prereg dir."""
    target = tmp_path / "prereg" / "smoke"
    shutil.copytree(repo_root / "prereg" / "smoke", target)
    return target / "plan.toml"


def edit(plan: Path, old: str, new: str, count: int = 1) -> Path:
    """Replace the first `count` occurrences of `old` (which must occur) in the plan file."""
    text = plan.read_text(encoding="utf-8")
    assert old in text, f"test setup: {old!r} not in plan"
    plan.write_text(text.replace(old, new, count), encoding="utf-8")
    return plan


def refused(plan: Path) -> str:
    with pytest.raises(BadInputError) as caught:
        load_plan(plan)
    return str(caught.value)


@pytest.mark.parametrize("study", PLANS)
def test_real_plans_load(repo_root: Path, study: str) -> None:
    plan = load_plan(repo_root / "prereg" / study)
    # an amendment keeps the name (and so the results/<name>/ directory) of the study it amends
    assert plan.name == (load_plan(repo_root / Path(plan.amends).parent).name if plan.amends else study)
    assert plan.verdict.arm in {a.name for a in plan.arms}
    if study in EVERY_CONTROL_KIND:
        kinds = set(CONTROL_KINDS) - ({"cross_device"} if study in BEFORE_CROSS_DEVICE else set())
        assert {c.kind for c in plan.controls} >= kinds


def test_embedded_default_meets_the_issue(repo_root: Path) -> None:
    """The default plan tests the claim on all 541 prompts, greedy, with the pinned embedded weights,
    and it amends v2, the sealed amendment of the first smollm2 plan (both stay in the ledger)."""
    from capsule.prereg.default_plan import default_plan

    plan = load_plan(repo_root / default_plan())
    assert plan.amends == "prereg/smollm2-135m-v2/plan.toml"
    assert load_plan(repo_root / "prereg" / "smollm2-135m-v2").amends == "prereg/smollm2-135m/plan.toml"
    primary = plan.arm(plan.verdict.arm)
    assert plan.prompts.subsets[primary.subset].rule == "all" and plan.verdict.min_n == 541
    assert (primary.max_new_tokens, primary.decoding.mode) == (512, "greedy")
    for control in plan.controls:
        for name in control.arms:
            subset = plan.prompts.subsets[plan.arm(name).subset]
            assert subset.rule == "all" or subset.n >= plan.verdict.min_pairs
    assert plan.model.files == load_plan(repo_root / "prereg" / "smollm2-135m").model.files
    assert plan.model.files["model.safetensors"].startswith("7ef915c9")


def test_agents_plan_pins_the_revision(repo_root: Path) -> None:
    plan = load_plan(repo_root / "prereg" / "agents-a1-4b")
    assert plan.model.revision == "945c40a4aa6f534d434a353207b8d42ecf7a5293"
    assert plan.model.loader == "image_text_to_text"
    assert any(a.env.get("VLLM_BATCH_INVARIANT") == "1" for a in plan.arms)
    assert plan.claim.value == 94.8 and "prompt_level_loose_acc" in plan.claim.other_readings


def test_metric_names_in_one_place() -> None:
    assert set(METRICS) | set(COMPOSITES) == set(ALL_METRICS)
    assert COMPOSITES["card_avg_strict"] == ("prompt_level_strict_acc", "inst_level_strict_acc")


def test_directory_or_file(repo_root: Path) -> None:
    assert load_plan(repo_root / "prereg" / "smoke" / "plan.toml").name == "smoke"


def test_unknown_key_lists_allowed(smoke_copy: Path) -> None:
    message = refused(edit(smoke_copy, "temperature = 0.0", "temprature = 0.0"))
    assert "arm 'hf-bf16-b4'.decoding: unknown key 'temprature' (allowed: " in message
    assert "temperature" in message and str(smoke_copy) in message


def test_unknown_top_level_key(smoke_copy: Path) -> None:
    assert "unknown key 'colour'" in refused(
        edit(smoke_copy, "scorer_seed = 0", "scorer_seed = 0\ncolour = 1")
    )


@pytest.mark.parametrize(
    "line",
    [
        "batch_size = 4",
        "seed = 0",
        "max_new_tokens = 48",
        'thinking = "off"',
        'unclosed = "empty"',
        'dtype = "bfloat16"',
        "env = {}",
        "top_p = 1.0",
    ],
)
def test_result_changing_settings_have_no_default(smoke_copy: Path, line: str) -> None:
    key = line.split(" =")[0]
    assert f"missing required key {key!r}" in refused(edit(smoke_copy, "\n" + line + "\n", "\n"))


def test_missing_scorer_seed(smoke_copy: Path) -> None:
    assert "missing required key 'scorer_seed'" in refused(edit(smoke_copy, "scorer_seed = 0\n", ""))


def test_missing_prompt_hash(smoke_copy: Path) -> None:
    message = refused(
        edit(
            smoke_copy,
            '[prompts]\nsha256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"',
            "[prompts]",
        )
    )
    assert "[prompts]: missing required key 'sha256'" in message


def test_greedy_with_sampling_knob(smoke_copy: Path) -> None:
    assert "mode 'greedy' takes temperature = 0.0" in refused(
        edit(smoke_copy, "temperature = 0.0", "temperature = 0.5")
    )


def test_wrong_types(smoke_copy: Path) -> None:
    assert "'batch_size' must be an integer" in refused(
        edit(smoke_copy, "batch_size = 4", 'batch_size = "4"')
    )


def test_vllm_needs_enforce_eager(smoke_copy: Path) -> None:
    message = refused(edit(smoke_copy, "enforce_eager = true, ", ""))
    assert "arm 'vllm-bf16-b4'.backend_options: missing required key 'enforce_eager'" in message


def test_max_num_seqs_is_batch_size(smoke_copy: Path) -> None:
    assert "unknown key 'max_num_seqs'" in refused(
        edit(smoke_copy, "enforce_eager = true,", "enforce_eager = true, max_num_seqs = 4,")
    )


def test_env_values_are_strings(smoke_copy: Path) -> None:
    message = refused(edit(smoke_copy, 'RESERVED_CPU = "0"', "RESERVED_CPU = 0"))
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU = 0: the value must be a string (quote it)" in message


def test_bad_sha(smoke_copy: Path) -> None:
    assert "full lowercase hex sha256" in refused(edit(smoke_copy, '"7ef915c9', '"7EF915C9'))


def test_unknown_subset(smoke_copy: Path) -> None:
    assert "unknown subset 'first9'" in refused(edit(smoke_copy, 'subset = "first8"', 'subset = "first9"'))


def test_subset_too_large(smoke_copy: Path) -> None:
    message = refused(edit(smoke_copy, "n = 8", "n = 600"))
    assert "'n' is 600; it must be at most 541 (the pinned prompt file holds 541 prompts)" in message


def test_seeded_subset_needs_seed(smoke_copy: Path) -> None:
    assert "missing required key 'seed'" in refused(edit(smoke_copy, "n = 8\nseed = 0\n", "n = 8\n"))


def test_control_unknown_arm(smoke_copy: Path) -> None:
    message = refused(edit(smoke_copy, '"hf-bf16-b4", "hf-bf16-b4-rerun"]', '"hf-bf16-b4", "hf-bf16-b5"]'))
    assert "control 'rerun': unknown arm 'hf-bf16-b5'" in message


def test_rerun_must_be_identical(smoke_copy: Path) -> None:
    text = smoke_copy.read_text(encoding="utf-8")
    start = text.index('name = "hf-bf16-b4-rerun"')
    smoke_copy.write_text(
        text[:start] + text[start:].replace("max_new_tokens = 48", "max_new_tokens = 47", 1)
    )
    assert "differ in max_new_tokens" in refused(smoke_copy)


def test_seed_vs_batch_grid_must_be_full(smoke_copy: Path) -> None:
    text = smoke_copy.read_text(encoding="utf-8")
    start = text.index('name = "hf-sample-s2-b4"')
    smoke_copy.write_text(text[:start] + text[start:].replace("seed = 2", "seed = 3", 1))
    assert "full grid" in refused(smoke_copy)


def test_control_kind_unknown(smoke_copy: Path) -> None:
    assert "expected one of" in refused(edit(smoke_copy, 'kind = "rerun_identity"', 'kind = "rerun"'))


def test_scorer_stability_needs_k(smoke_copy: Path) -> None:
    assert "missing required key 'k'" in refused(edit(smoke_copy, "k = 3\n", ""))


def test_compliant_file_must_exist(smoke_copy: Path) -> None:
    (smoke_copy.parent / "controls" / "compliant.jsonl").unlink()
    assert "does not exist" in refused(smoke_copy)


def test_compliant_rows_checked(smoke_copy: Path) -> None:
    (smoke_copy.parent / "controls" / "compliant.jsonl").write_text('{"key": 1, "text": "x"}\n')
    assert "compliant.jsonl:1" in refused(smoke_copy)


def test_comparison_metric_and_arms(smoke_copy: Path) -> None:
    assert "composite" in refused(
        edit(smoke_copy, 'metric = "prompt_level_strict_acc"', 'metric = "card_avg_loose"')
    )


def test_comparison_unknown_metric(smoke_copy: Path) -> None:
    assert "expected one of" in refused(
        edit(smoke_copy, 'metric = "prompt_level_strict_acc"', 'metric = "accuracy"')
    )


def test_comparison_needs_shared_prompts(smoke_copy: Path) -> None:
    message = refused(
        edit(
            smoke_copy, '["hf-bf16-b4", "vllm-bf16-b4"]\nmetric', '["hf-bf16-b4", "hf-sample-s1-b2"]\nmetric'
        )
    )
    assert "must share their prompts" in message


def test_verdict_composite_needs_bootstrap(smoke_copy: Path) -> None:
    assert "only 'bootstrap'" in refused(edit(smoke_copy, 'interval = "bootstrap"', 'interval = "wilson"'))


def test_verdict_metric_is_the_claims(smoke_copy: Path) -> None:
    message = refused(
        edit(smoke_copy, 'metric = "card_avg_strict"\ninterval', 'metric = "card_avg_loose"\ninterval')
    )
    assert "must be the claim's reading" in message


def test_verdict_unknown_arm(smoke_copy: Path) -> None:
    assert "[verdict]: unknown arm" in refused(edit(smoke_copy, 'arm = "hf-bf16-b4"', 'arm = "nope"'))


def test_duplicate_arm_names(smoke_copy: Path) -> None:
    assert "share the name" in refused(edit(smoke_copy, 'name = "hf-bf16-b4-rerun"', 'name = "hf-bf16-b4"'))


def test_amends_needs_reason(smoke_copy: Path) -> None:
    message = refused(
        edit(smoke_copy, "scorer_seed = 0", 'scorer_seed = 0\namends = "prereg/smoke/plan.toml"')
    )
    assert "'amends' and 'amend_reason' go together" in message


def test_hub_model_needs_revision(repo_root: Path, tmp_path: Path) -> None:
    target = tmp_path / "agents"
    shutil.copytree(repo_root / "prereg" / "agents-a1-4b", target)
    plan = edit(target / "plan.toml", 'revision = "945c40a4aa6f534d434a353207b8d42ecf7a5293"\n', "")
    assert "missing required key 'revision'" in refused(plan)


def test_not_toml(smoke_copy: Path) -> None:
    smoke_copy.write_text("name = \n")
    assert "not valid TOML" in refused(smoke_copy)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such plan file" in refused(tmp_path / "nope.toml")


def test_plan_signers_of_a_plan_copy_with_a_5000_digit_integer_is_one_error(tmp_path: Path) -> None:
    """issue 26, finding 8: `verify` reads a run's plan copy for its [evidence] signers; tomllib's
    int() refuses 5000 digits with a ValueError that used to escape as a traceback."""
    from capsule.prereg.plan_tables import plan_signers

    with pytest.raises(BadInputError, match="not valid TOML"):
        plan_signers(b"scorer_seed = " + b"9" * 5000 + b"\n", tmp_path / "plan.toml")
    with pytest.raises(BadInputError, match="nested too deeply"):
        plan_signers(b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", tmp_path / "plan.toml")

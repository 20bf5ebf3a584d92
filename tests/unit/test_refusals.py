"""Careless or hostile input is refused before anything runs: one `Error:` line, exit 2, nothing written.

Names that become file names (one rule, `capsule.run_dir.NAME_RE`), backend names, prompt selections,
a plan's env (the allow-list of `capsule.prereg.numerics_env`), the bounds of `capsule.prereg.limits`
and of the backend options, the pinned prompt hash at seal time, and the manifest `report` reads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_report_support import make_run

from capsule.cli import cli
from capsule.errors import BadInputError
from capsule.pins import IFEVAL_PROMPTS_N, IFEVAL_PROMPTS_SHA256
from capsule.prereg.backend_specs import BACKENDS
from capsule.prereg.limits import BATCH_SIZE, BOOTSTRAP_RESAMPLES, MAX_NEW_TOKENS, STABILITY_REPEATS, TABLES
from capsule.prereg.loader import load_plan
from capsule.prereg.numerics_env import NUMERICS_ENV
from capsule.run_dir import RunDir

DRY = ["--dry-run", "--no-progress", "--max-new-tokens", "4"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` and its bytes: what a refusal must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def refused(result: Result, *fragments: str) -> str:
    """The one-line error of a refused command (exit 2), which must contain every fragment."""
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (runs would land under it)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "..", ".hidden", "UPPER", "a/b", "", "x" * 65])
def test_generate_refuses_a_name_that_is_not_a_safe_file_name(workdir: Path, name: str) -> None:
    out = workdir / "out"
    refused(invoke("generate", "--name", name, "--out", str(out), *DRY), "must match")
    refused(invoke("generate", "--name", name, *DRY), "must match")  # the default output root too
    assert list(workdir.iterdir()) == []
    assert not Path("/abs").exists() and not (workdir.parent.parent / "x").exists()


def test_run_dir_paths_refuse_unsafe_names(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    for unsafe in ("../x", "/etc/passwd", ".x"):
        for path_of in (run.generations, run.generations_meta, run.scores, run.scores_meta, run.stability):
            with pytest.raises(BadInputError, match="must match"):
                path_of(unsafe)
    assert run.generations("hf-bf16-b4") == tmp_path / "generations" / "hf-bf16-b4.jsonl"


def test_generate_refuses_an_unknown_backend_listing_the_known_ones(workdir: Path) -> None:
    line = refused(invoke("generate", "--backend", "bogus", *DRY), "'backend' is 'bogus'")
    assert f"expected one of: {', '.join(BACKENDS)}" in line
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    ("selection", "fragment"),
    [
        (["--first", "-2"], f"--first -2: give a number of prompts from 1 to {IFEVAL_PROMPTS_N}"),
        (["--first", "0"], "--first 0: give a number of prompts from 1"),
        (["--first", str(IFEVAL_PROMPTS_N + 1)], f"from 1 to {IFEVAL_PROMPTS_N}"),
        (["--keys", ","], "'' is not a prompt key"),
        (["--keys", ""], "'' is not a prompt key"),
        (["--keys", "1000,,1001"], "'' is not a prompt key"),
        (["--keys", "１０００"], "'１０００' is not a prompt key"),  # full-width digits
        (["--keys", "+1000"], "'+1000' is not a prompt key"),
        (["--keys", "1_000"], "'1_000' is not a prompt key"),
        (["--keys", "9" * 5000], "is not a prompt key"),
        (["--keys", "1000,1000"], "each key once; repeated: [1000]"),
        (["--keys", "1000", "--first", "2"], "give --keys or --first, not both"),
    ],
)
def test_generate_refuses_an_empty_or_malformed_selection(
    workdir: Path, selection: list[str], fragment: str
) -> None:
    refused(invoke("generate", *selection, *DRY), fragment)
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        (["--max-new-tokens", str(MAX_NEW_TOKENS.high + 1)], f"it must be at most {MAX_NEW_TOKENS.high}"),
        (["--batch-size", "1000000000"], f"it must be at most {BATCH_SIZE.high}"),
        (["--seed", str(2**64)], f"it must be at most {2**63 - 1}"),
    ],
)
def test_generate_refuses_settings_beyond_their_bounds(
    workdir: Path, option: list[str], fragment: str
) -> None:
    refused(invoke("generate", *option, "--dry-run", "--no-progress"), fragment)
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    "option", [["--backend", "vllm"], ["--name", "x"], ["--first", "2"], ["--keys", "1000"], ["--seed", "1"]]
)
def test_generate_with_a_plan_refuses_adhoc_options(repo_copy: Path, option: list[str]) -> None:
    before = tree(repo_copy)
    refused(
        invoke("generate", "--plan", "prereg/smoke", "--arm", "hf-bf16-b4", *option, "--dry-run"),
        f"{option[0]}: ad-hoc option(s); with --plan the arm's settings are the plan's",
    )
    assert tree(repo_copy) == before


# ---------------------------------------------------------------- plans: refused at load and at seal


@pytest.fixture
def study(repo_copy: Path) -> Path:
    """prereg/fresh/plan.toml: the smoke plan under a new, unsealed name, in a repository copy."""
    shutil.copytree(repo_copy / "prereg" / "smoke", repo_copy / "prereg" / "fresh")
    plan = repo_copy / "prereg" / "fresh" / "plan.toml"
    plan.write_text(plan.read_text(encoding="utf-8").replace('name = "smoke"', 'name = "fresh"', 1))
    load_plan(plan)  # valid as it stands: each test below breaks one thing
    return plan


def edit(plan: Path, old: str, new: str) -> Path:
    text = plan.read_text(encoding="utf-8")
    assert old in text, f"test setup: {old!r} not in the plan"
    plan.write_text(text.replace(old, new, 1), encoding="utf-8")
    return plan


def seal_refused(repo: Path, plan: Path, *fragments: str) -> str:
    """Sealing `plan` fails with one line naming `fragments`, and the ledger is unchanged; loading it
    (what generate and reproduce do first) fails with the same message."""
    ledger = repo / "prereg" / "ledger.jsonl"
    before = ledger.read_bytes()
    line = refused(invoke("prereg", "seal", "prereg/fresh", "--note", "try"), *fragments)
    assert ledger.read_bytes() == before
    with pytest.raises(BadInputError) as caught:
        load_plan(plan.relative_to(repo))
    assert line == f"Error: {caught.value}"
    return line


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "HOME", "lower"])
def test_a_plan_env_outside_the_allow_list_is_refused(repo_copy: Path, study: Path, variable: str) -> None:
    edit(study, 'env = { VLLM_CPU_NUM_OF_RESERVED_CPU = "0" }', f'env = {{ {variable} = "/tmp/x.so" }}')
    line = seal_refused(repo_copy, study, f"'{variable}' is not a numerics variable a plan may set")
    assert "VLLM_BATCH_INVARIANT" in line  # the allowed names are listed


@pytest.mark.parametrize("value", ['"a\\u0000b"', '"line\\nbreak"', '"' + "1" * 257 + '"', "0"])
def test_a_plan_env_value_must_be_printable_ascii_text(repo_copy: Path, study: Path, value: str) -> None:
    edit(study, 'env = { VLLM_CPU_NUM_OF_RESERVED_CPU = "0" }', f"env = {{ OMP_NUM_THREADS = {value} }}")
    seal_refused(repo_copy, study, "OMP_NUM_THREADS = ", "at most 256 printable ASCII characters")


def test_every_allowed_variable_loads(study: Path) -> None:
    table = ", ".join(f'{name} = "1"' for name in NUMERICS_ENV)
    edit(study, 'env = { VLLM_CPU_NUM_OF_RESERVED_CPU = "0" }', f"env = {{ {table} }}")
    arm = next(a for a in load_plan(study).arms if a.backend == "vllm")
    assert set(arm.env) == set(NUMERICS_ENV)


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        (
            "bootstrap_resamples = 2000",
            "bootstrap_resamples = 1000000000",
            f"'bootstrap_resamples' is 1000000000; it must be at most {BOOTSTRAP_RESAMPLES.high}",
        ),
        ("k = 3", "k = 1000000", f"'k' is 1000000; it must be at most {STABILITY_REPEATS.high}"),
        ("max_new_tokens = 48", "max_new_tokens = 10000000", f"it must be at most {MAX_NEW_TOKENS.high}"),
        ("batch_size = 4", "batch_size = 100000", f"it must be at most {BATCH_SIZE.high}"),
        ("n = 8", "n = 100000", f"'n' is 100000; it must be at most {IFEVAL_PROMPTS_N}"),
        ("min_n = 8", "min_n = 542", f"'min_n' is 542; it must be at most {IFEVAL_PROMPTS_N}"),
        ("min_pairs = 50", "min_pairs = 1000", f"'min_pairs' is 1000; it must be at most {IFEVAL_PROMPTS_N}"),
        ("\nseed = 0", f"\nseed = {2**70}", f"at most {2**63 - 1} (TOML integers are signed 64-bit)"),
        ("scorer_seed = 0", "scorer_seed = " + "9" * 5000, "not valid TOML"),
        ("gpu_memory_utilization = 0.3", "gpu_memory_utilization = 5.0", "it must lie in [0.01, 1.0]"),
        ("max_model_len = 2048", "max_model_len = 1000000000", "it must lie in [1, 1048576]"),
        ("max_model_len = 2048", "max_model_len = 0", "'max_model_len' is 0; it must lie in [1,"),
    ],
)
def test_plan_counts_beyond_their_bounds_are_refused_with_the_bound(
    repo_copy: Path, study: Path, old: str, new: str, fragment: str
) -> None:
    edit(study, old, new)
    seal_refused(repo_copy, study, fragment)


def test_a_plan_with_too_many_arms_is_refused(repo_copy: Path, study: Path) -> None:
    text = study.read_text(encoding="utf-8")
    start = text.index("[[arms]]")
    end = text.index("[[arms]]", start + 1)
    arm = text[start:end]
    extra = "".join(arm.replace('name = "hf-bf16-b4"', f'name = "extra-{i}"', 1) for i in range(TABLES.high))
    study.write_text(text[:start] + extra + text[start:], encoding="utf-8")
    seal_refused(repo_copy, study, f"[[arms]] tables; a plan may have at most {TABLES.high}")


def test_a_plan_sealing_another_prompt_file_is_refused_at_seal_time(repo_copy: Path, study: Path) -> None:
    edit(study, IFEVAL_PROMPTS_SHA256, "ab" * 32)
    line = seal_refused(repo_copy, study, "[prompts]: sha256 abab", "is not the pinned prompt file")
    assert IFEVAL_PROMPTS_SHA256 in line and "capsule/pins.py" in line


def test_a_plan_name_must_be_a_safe_file_name(repo_copy: Path, study: Path) -> None:
    edit(study, 'name = "fresh"', 'name = "../../fresh"')
    seal_refused(repo_copy, study, "top level: name '../../fresh' must match")


def test_an_arm_name_must_be_a_safe_file_name(repo_copy: Path, study: Path) -> None:
    edit(study, 'name = "hf-bf16-b4-rerun"', 'name = "/tmp/rerun"')
    seal_refused(repo_copy, study, "name '/tmp/rerun' must match")


# ---------------------------------------------------------------- report: the manifest it renders


@pytest.mark.parametrize(
    ("manifest", "fragment"),
    [
        ({}, "field 'schema_version' is None"),
        ([], "a manifest must be a JSON object"),
        (None, "a manifest must be a JSON object"),
        ("drop host", "field 'host': required field missing"),
    ],
)
def test_report_refuses_a_run_whose_manifest_is_not_a_manifest(
    tmp_path: Path, manifest: object, fragment: str
) -> None:
    run = make_run(tmp_path)
    if manifest == "drop host":
        full = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        del full["host"]
        manifest = full
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    before = tree(run)
    refused(invoke("report", str(run), "--no-plots"), "manifest.json: ", fragment)
    assert tree(run) == before

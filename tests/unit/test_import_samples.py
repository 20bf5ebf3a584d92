"""`capsule import-samples`: lm-eval and lighteval IFEval samples, checked against our scorer.

Fixtures are written by the tests (tests/unit/harness_fixtures.py) from the pinned prompts. Each file
holds rows where the stored verdict equals ours and rows where it differs for a documented reason:
a random letter (key 1122), langdetect (key 1019), a <think> block (lighteval), and a deterministic
instruction the harness decided otherwise (a scorer-version difference).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from harness_fixtures import (
    LIGHTEVAL_FILE,
    LIGHTEVAL_JSONL_FILE,
    LM_EVAL_FILE,
    lighteval_legacy_row,
    lighteval_row,
    lm_eval_row,
    write_jsonl,
)

from capsule.cli import cli
from capsule.generation.harness.lighteval import POST_PROCESSED
from capsule.pipeline.import_samples import ImportRequest, arm_name, import_samples
from capsule.run_dir import name_problem
from ifeval_scorer import Prompt, evaluate_prompt, load_prompts
from ifeval_scorer.rule import LETTERS

LETTER_KEY, LANGDETECT_KEY = 1122, 1019
LETTER_TEXT = "hello #one #two #three #four"
LANGDETECT_TEXT = "the la le der"  # langdetect: English under seed 0, not under seeds 1 and 2
FAIL = {"strict": False, "loose": False}


@pytest.fixture(scope="module")
def prompts(prompts_path: Path) -> dict[int, Prompt]:
    from capsule.artifacts.cache import use_cache_for_scorer

    use_cache_for_scorer()
    return load_prompts(prompts_path)


def other_letter_verdict(prompt: Prompt, text: str, index: int) -> bool:
    """A verdict some letter gives and seed 0's letter does not (the fixture needs one to exist)."""
    seeded = evaluate_prompt(prompt, text, 0).strict[index]
    for letter in LETTERS:
        if evaluate_prompt(prompt, text, 0, letter=letter).strict[index] != seeded:
            return not seeded
    raise AssertionError("the fixture text must pass for some letters and fail for others")


def lm_eval_rows(prompts: dict[int, Prompt]) -> list[dict[str, Any]]:
    letter = other_letter_verdict(prompts[LETTER_KEY], LETTER_TEXT, 1)
    return [
        lm_eval_row(0, prompts[1001], "No commas here at all"),
        lm_eval_row(1, prompts[1162], "Plain words only", flips={0: FAIL}),
        lm_eval_row(2, prompts[LETTER_KEY], LETTER_TEXT, flips={1: {"strict": letter, "loose": letter}}),
        lm_eval_row(3, prompts[LANGDETECT_KEY], LANGDETECT_TEXT, flips={0: FAIL}),
        lm_eval_row(4, prompts[1005], "Visit [address] at [time]"),
    ]


def run(tmp_path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["import-samples", *args, "--out", str(tmp_path / "out")])


def record(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out" / "import.json").read_text())


def reasons(summary: dict[str, Any]) -> dict[int, str]:
    return {item["key"]: item["reason"] for item in summary["disagreements"]}


def test_lm_eval_import_reports_each_difference_with_its_reason(tmp_path: Path, prompts: dict) -> None:
    samples = write_jsonl(tmp_path / "samples_ifeval_2026-12-01.jsonl", lm_eval_rows(prompts))
    result = run(tmp_path, "lm-eval", str(samples))
    assert result.exit_code == 0, result.output
    summary = record(tmp_path)["arms"]["samples_ifeval_2026-12-01"]
    assert summary["layout"].startswith("lm-eval 0.4") and summary["n"] == 5
    assert reasons(summary) == {
        1162: "scorer-version", LETTER_KEY: "random-letter", LANGDETECT_KEY: "langdetect"
    }
    assert summary["band"]["ambiguous_keys"] == [LETTER_KEY]
    assert summary["metrics_pct"]["ours"]["prompt_level_strict_acc"] != summary["metrics_pct"]["harness"][
        "prompt_level_strict_acc"
    ]
    assert "random-letter" in result.output and "key 1019 change_case:english_lowercase" in result.output
    assert "strict harness fail / ours pass" in result.output


def test_imported_rows_are_capsule_generations_and_scores(tmp_path: Path, prompts: dict) -> None:
    samples = write_jsonl(tmp_path / "s.jsonl", lm_eval_rows(prompts))
    assert run(tmp_path, "lm-eval", str(samples)).exit_code == 0
    generations = tmp_path / "out" / "generations" / "s.jsonl"
    rows = [json.loads(line) for line in generations.read_text().splitlines()]
    assert [r["key"] for r in rows] == [1001, 1162, LETTER_KEY, LANGDETECT_KEY, 1005]
    assert rows[2]["response"] == LETTER_TEXT and rows[2]["arm"] == "s"
    assert rows[2]["source"] == {
        "harness": "lm-eval", "where": f"{samples}:3", "scored": "filtered_resps[0]", "truncated_tokens": 0
    }
    meta = json.loads((tmp_path / "out" / "generations" / "s.meta.json").read_text())
    assert meta["imported"]["harness"] == "lm-eval" and meta["status"] == "complete"
    rescored = tmp_path / "rescored.jsonl"
    assert CliRunner().invoke(cli, ["score", str(generations), "--out", str(rescored)]).exit_code == 0
    assert rescored.read_bytes() == (tmp_path / "out" / "scores" / "s.jsonl").read_bytes()


def test_lighteval_details_with_a_think_block_and_a_random_letter(tmp_path: Path, prompts: dict) -> None:
    think = "<think>first, second, third</think>An answer without any comma"
    letter_text = "banana banana banana ice cream"
    letter = other_letter_verdict(prompts[1129], letter_text, 0)
    rows = [
        lighteval_row(prompts[1001], think, scored_text=think),  # older lighteval scored the think block
        lighteval_row(prompts[1129], letter_text, flips={0: {"strict": letter, "loose": letter}}),
        lighteval_row(prompts[1187], "Fine words"),
    ]
    rows[2]["metric"] = json.dumps(rows[2]["metric"])  # an export that left the struct as JSON text
    details = write_jsonl(tmp_path / "details_extended|ifeval|0_2026.jsonl", rows)
    result = run(tmp_path, "lighteval", str(details))
    assert result.exit_code == 0, result.output
    (summary,) = record(tmp_path)["arms"].values()
    assert summary["layout"].startswith("lighteval >= 0.10")
    assert reasons(summary) == {1001: "think-block", 1129: "random-letter"}
    assert summary["think_blocks_removed"] == 1
    generations = next((tmp_path / "out" / "generations").glob("*.jsonl"))
    first = json.loads(generations.read_text().splitlines()[0])
    assert first["raw"] == think and first["response"] == "An answer without any comma"


def test_lighteval_legacy_details(tmp_path: Path, prompts: dict) -> None:
    rows = [
        lighteval_legacy_row(prompts[1001], "No commas at all"),
        lighteval_legacy_row(prompts[1162], "Words", flips={0: FAIL}),
    ]
    result = run(tmp_path, "lighteval", str(write_jsonl(tmp_path / "legacy.jsonl", rows)))
    assert result.exit_code == 0, result.output
    summary = record(tmp_path)["arms"]["legacy"]
    assert summary["layout"].startswith("lighteval 0.5-0.9") and reasons(summary) == {1162: "scorer-version"}


def test_a_response_that_looks_like_json_stays_text(tmp_path: Path, prompts: dict) -> None:
    rows = lm_eval_rows(prompts)
    rows[0] = lm_eval_row(0, prompts[1001], '["a list", "as the answer"]')
    assert run(tmp_path, "lm-eval", str(write_jsonl(tmp_path / "j.jsonl", rows))).exit_code == 0
    first = json.loads((tmp_path / "out" / "generations" / "j.jsonl").read_text().splitlines()[0])
    assert first["response"] == '["a list", "as the answer"]'


def test_paired_comparison_of_two_runs(tmp_path: Path, prompts: dict) -> None:
    first = write_jsonl(tmp_path / "run_a.jsonl", lm_eval_rows(prompts))
    changed = lm_eval_rows(prompts)
    changed[0] = lm_eval_row(0, prompts[1001], "Commas, everywhere, now")
    second = write_jsonl(tmp_path / "run_b.jsonl", changed)
    result = run(tmp_path, "lm-eval", str(first), "--against", str(second))
    assert result.exit_code == 0, result.output
    paired = record(tmp_path)["paired"]
    ours = paired["ours"]
    assert ours["arms"] == ["run_a", "run_b"] and ours["n_pairs"] == 5
    assert (ours["b"], ours["c"]) == (1, 0) and ours["verdict"] == "UNDERPOWERED"
    assert paired["harness"]["n_pairs"] == 5 and paired["settings"]["resamples"] == 10_000
    assert "run_a vs run_b on prompt_level_strict_acc (ours verdicts)" in result.output


def test_api_writes_nothing_until_every_file_is_checked(
    tmp_path: Path, prompts: dict, prompts_path: Path
) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", lm_eval_rows(prompts))
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"doc": {}}])
    with pytest.raises(Exception, match="bad.jsonl:1"):
        import_samples(
            ImportRequest("lm-eval", good, against=bad, out=tmp_path / "out", prompts_path=prompts_path)
        )
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def edited(rows: list[dict[str, Any]], index: int, path: tuple[str, ...], value: Any) -> list[dict[str, Any]]:
    target = rows[index]
    for name in path[:-1]:
        target = target[name]
    target[path[-1]] = value
    return rows


BAD_LM_EVAL = [
    (lambda rows, p: edited(rows, 1, ("doc", "prompt"), p[1162].prompt + " (edited)"),
     "s.jsonl:2: field `doc.prompt`", "not among the 541 pinned"),
    (lambda rows, p: rows + [rows[0]], "s.jsonl:6: field `doc.key`", "repeats"),
    (lambda rows, p: edited(rows, 0, ("doc", "instruction_id_list"), ["punctuation:no_comma", "x:y"]),
     "s.jsonl:1: field `doc.instruction_id_list`", "differs from key 1001"),
    (lambda rows, p: edited(rows, 2, ("inst_level_strict_acc",), [True]),
     "s.jsonl:3: field `inst_level_strict_acc`", "expected 2 verdicts"),
    (lambda rows, p: [{k: v for k, v in rows[0].items() if k != "prompt_level_loose_acc"}],
     "s.jsonl:1: field `prompt_level_loose_acc`", "missing"),
    (lambda rows, p: edited(rows, 0, ("metrics",), ["exact_match"]),
     "s.jsonl:1: field `metrics`", "not the four"),
    (lambda rows, p: [lighteval_row(p[1001], "x")], "s.jsonl:1: field `model_response`",
     "import-samples lighteval"),
    (lambda rows, p: edited(rows, 0, ("doc", "key"), 1002), "s.jsonl:1: field `doc.key`", "pinned key 1001"),
]


@pytest.mark.parametrize(("change", "where", "problem"), BAD_LM_EVAL)
def test_bad_lm_eval_input_is_one_error_naming_file_line_and_field(
    tmp_path: Path, prompts: dict, change: Any, where: str, problem: str
) -> None:
    samples = write_jsonl(tmp_path / "s.jsonl", change(lm_eval_rows(prompts), prompts))
    result = run(tmp_path, "lm-eval", str(samples))
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and where in line and problem in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("rows", "where"), [
    (lambda p: [lm_eval_row(0, p[1001], "x")], "d.jsonl:1: field `filtered_resps`"),
    (lambda p: [{"doc": {"query": "q"}}], "d.jsonl:1: field `model_response`"),
    (lambda p: [lighteval_row(p[1001], "x"), lighteval_legacy_row(p[1001], "x")], "d.jsonl:2: field `(row)`"),
])
def test_bad_lighteval_input_names_the_field(tmp_path: Path, prompts: dict, rows: Any, where: str) -> None:
    result = run(tmp_path, "lighteval", str(write_jsonl(tmp_path / "d.jsonl", rows(prompts))))
    assert result.exit_code == 2 and where in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_lighteval_without_instruction_level_verdicts_is_refused(tmp_path: Path, prompts: dict) -> None:
    row = lighteval_row(prompts[1001], "No commas")
    row["metric"] = {k: v for k, v in row["metric"].items() if k.startswith("prompt_level")}
    result = run(tmp_path, "lighteval", str(write_jsonl(tmp_path / "d.jsonl", [row])))
    assert result.exit_code == 2
    assert "d.jsonl:1: field `metric.inst_level_strict_acc`: missing" in result.output


def test_an_aggregate_results_file_is_not_a_sample_log(tmp_path: Path) -> None:
    results = tmp_path / "results_2026.json"
    results.write_text(json.dumps({"results": {"ifeval": {}}, "versions": {"ifeval": 4.0}}, indent=2))
    result = run(tmp_path, "lm-eval", str(results))
    assert result.exit_code == 2 and "results_2026.json:1: one JSON object" in result.output
    assert "--log_samples" in result.output


def test_unknown_harness_and_existing_output_are_refused(tmp_path: Path, prompts: dict) -> None:
    samples = write_jsonl(tmp_path / "s.jsonl", lm_eval_rows(prompts))
    assert run(tmp_path, "helm", str(samples)).exit_code == 2
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    result = run(tmp_path, "lm-eval", str(samples))
    assert result.exit_code == 2 and "not empty" in result.output
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]


def test_parquet_details_need_pyarrow_or_are_read(tmp_path: Path, prompts: dict) -> None:
    rows = [lighteval_row(prompts[1001], "No commas"), lighteval_row(prompts[1162], "Words")]
    try:
        import pyarrow as arrow
        import pyarrow.parquet as parquet
    except ImportError:
        path = tmp_path / LIGHTEVAL_FILE
        path.write_bytes(b"PAR1" + b"\0" * 16)
        result = run(tmp_path, "lighteval", str(path))
        assert result.exit_code == 2 and "pyarrow" in result.output and "JSONL" in result.output
        return
    for row in rows:  # google/IFEval's kwargs carry every field, None where unused (parquet needs one)
        row["doc"]["specific"]["kwargs"] = [{"num_words": None}]
    path = tmp_path / LIGHTEVAL_FILE
    parquet.write_table(arrow.Table.from_pylist(rows), path)
    result = run(tmp_path, "lighteval", str(path))
    assert result.exit_code == 0, result.output
    assert record(tmp_path)["arms"]["details_ifeval-0_2026-12-01t20-19-23.902605"]["n"] == 2


def test_lighteval_0_13_parquet_under_its_own_name(in_tmp: Path, prompts: dict) -> None:
    """`capsule import-samples lighteval 'details_ifeval|0_<date>T<time>.parquet'` as the issue gives
    it: a file in lighteval 0.13's layout (text_post_processed, truncated_tokens_count) under the name
    it writes."""
    arrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    rows = [lighteval_row(prompts[1001], "<think>a, b</think>No commas", post_processed="No commas"),
            lighteval_row(prompts[1162], "Words", post_processed="Words", truncated=7)]
    for row in rows:
        row["doc"]["specific"]["kwargs"] = [{"num_words": None}]
    parquet.write_table(arrow.Table.from_pylist(rows), in_tmp / LIGHTEVAL_FILE)
    result = CliRunner().invoke(cli, ["import-samples", "lighteval", str(in_tmp / LIGHTEVAL_FILE)])
    assert result.exit_code == 0, result.output
    (summary,) = json.loads((in_tmp / "runs/imports/details_ifeval-0_2026-12-01t20-19-23.902605"
                             / "import.json").read_text())["arms"].values()
    assert summary["scored_text"] == {POST_PROCESSED: 2} and summary["disagreements"] == []
    assert [item["key"] for item in summary["truncated_inputs"]] == [1162]


@pytest.fixture()
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory is tmp_path, so the default output runs/imports/<name> lands there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_harnesses_own_file_names_import_without_out(in_tmp: Path, prompts: dict) -> None:
    """The README's commands with the names lm-eval 0.4.13 and lighteval 0.13.0 write (a capital T,
    a `|`): each imports into runs/imports/<its name lowercased, `|` as `-`>."""
    samples = write_jsonl(in_tmp / LM_EVAL_FILE, lm_eval_rows(prompts))
    result = CliRunner().invoke(cli, ["import-samples", "lm-eval", str(samples)])
    assert result.exit_code == 0, result.output
    arm = "samples_ifeval_2026-12-01t19-29-51.193973"
    assert (in_tmp / "runs" / "imports" / arm / "generations" / f"{arm}.jsonl").is_file()
    details = write_jsonl(in_tmp / LIGHTEVAL_JSONL_FILE, [lighteval_row(prompts[1001], "No commas")])
    result = CliRunner().invoke(cli, ["import-samples", "lighteval", str(details)])
    assert result.exit_code == 0, result.output
    arm = "details_ifeval-0_2026-12-01t20-19-23.902605"
    assert (in_tmp / "runs" / "imports" / arm / "scores" / f"{arm}.jsonl").is_file()
    result = CliRunner().invoke(cli, ["import-samples", "lm-eval", str(samples), "--against", str(details),
                                      "--against-harness", "lighteval"])
    assert result.exit_code == 0, result.output
    assert (in_tmp / "runs" / "imports" / f"samples_ifeval_2026-12-01t19-29-51.193973-vs-{arm}").is_dir()


@pytest.mark.parametrize(("file_name", "arm"), [
    (LM_EVAL_FILE, "samples_ifeval_2026-12-01t19-29-51.193973"),
    (LIGHTEVAL_FILE, "details_ifeval-0_2026-12-01t20-19-23.902605"),
    ("details_extended|ifeval|0_2026.jsonl", "details_extended-ifeval-0_2026"),
    ("Run A (copy).jsonl", "run-a-copy"),
    ("..hidden.jsonl", "hidden"),
    ("___.jsonl", "import"),
    ("é.jsonl", "import"),
    ("x" * 80 + ".jsonl", "x" * 64),
])
def test_arm_names_are_the_file_names_made_safe(file_name: str, arm: str) -> None:
    name = arm_name(Path("some/dir") / file_name)
    assert name == arm and name_problem(name) is None
    assert name_problem(name + "\n") is not None  # the rule matches whole names (fullmatch)


@pytest.mark.parametrize(("first", "second"), [
    ("Run_A.jsonl", "run_a.jsonl"),  # differ only in case
    ("run|a.jsonl", "run a.jsonl"),  # differ only in unsafe characters
    ("a/" + LM_EVAL_FILE, "b/" + LM_EVAL_FILE),  # one name in two directories
])
def test_two_files_giving_one_arm_name_are_refused(tmp_path: Path, prompts: dict, first: str,
                                                   second: str) -> None:
    paths = [tmp_path / first, tmp_path / second]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, lm_eval_rows(prompts))
    result = run(tmp_path, "lm-eval", str(paths[0]), "--against", str(paths[1]))
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "both give the arm name" in result.output
    assert not (tmp_path / "out").exists()


def test_two_files_with_no_common_prompt_are_one_error(tmp_path: Path, prompts: dict) -> None:
    rows = lm_eval_rows(prompts)
    first, second = write_jsonl(tmp_path / "a.jsonl", rows[:2]), write_jsonl(tmp_path / "b.jsonl", rows[2:])
    result = run(tmp_path, "lm-eval", str(first), "--against", str(second))
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "share no prompt" in result.output
    assert not (tmp_path / "out").exists()
    details = write_jsonl(tmp_path / LIGHTEVAL_JSONL_FILE, [lighteval_row(prompts[1187], "Fine words")])
    result = run(tmp_path, "lm-eval", str(first), "--against", str(details), "--against-harness", "lighteval")
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "share no prompt" in result.output


def test_lighteval_scored_text_is_the_recorded_one_and_truncation_is_flagged(
    tmp_path: Path, prompts: dict
) -> None:
    """lighteval 0.13 records the text it scored (text_post_processed, after --reasoning-tags): it is
    scored as recorded, even where removing <think> blocks would give another text, and said so; a
    left-truncated input is flagged."""
    raw = "[reasoning]first, second[/reasoning]An answer without any comma"
    rows = [
        lighteval_row(prompts[1001], raw, post_processed="An answer without any comma"),
        lighteval_row(prompts[1162], "Words", post_processed="Words", truncated=12),
    ]
    result = run(tmp_path, "lighteval", str(write_jsonl(tmp_path / LIGHTEVAL_JSONL_FILE, rows)))
    assert result.exit_code == 0, result.output
    (summary,) = record(tmp_path)["arms"].values()
    assert summary["scored_text"] == {POST_PROCESSED: 2} and summary["disagreements"] == []
    assert summary["truncated_inputs"] == [
        {"key": 1162, "tokens": 12, "where": f"{tmp_path / LIGHTEVAL_JSONL_FILE}:2"}
    ]
    assert f"text scored: {POST_PROCESSED} (2)" in result.output
    assert "1 input left-truncated by the harness (keys 1162)" in result.output
    first = json.loads(next((tmp_path / "out" / "generations").glob("*.jsonl")).read_text().splitlines()[0])
    assert first["raw"] == raw and first["response"] == "An answer without any comma"
    assert first["source"]["scored"] == POST_PROCESSED



# ---- issue 26, finding 8: nested text is read strictly (no ast.literal_eval) --------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("['a', \"b\"]", ["a", "b"]),
        ("{'prompt_level_strict_acc': True, 'x': [1, -2.5, None]}",
         {"prompt_level_strict_acc": True, "x": [1, -2.5, None]}),
        ("[('a', 'b')]", [["a", "b"]]),
        ('{"a": [true, false]}', {"a": [True, False]}),
    ],
)
def test_python_and_json_text_of_plain_literals_is_read(text: str, value: object) -> None:
    from capsule.generation.harness.samples import decoded

    assert decoded(text) == value


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, "{[]: 1}", "{1, 2}", "[" + "9" * 5000 + "]", "[1e999999]", "[" + "-" * 100_000 + "1]",
     "[__import__('os')]", "[b'x']", "[1j]", "{'a': 1, 'a': 2}", "[" * 70 + "]" * 70, "['\x00']"],
)
def test_text_that_is_no_plain_literal_stays_text(text: str) -> None:
    """What used to raise (RecursionError, MemoryError, TypeError, ValueError) or build a set: left as
    the text it is, which the field's type check then refuses in one line."""
    from capsule.generation.harness.samples import decoded

    assert decoded(text) == text

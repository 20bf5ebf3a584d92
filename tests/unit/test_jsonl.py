"""The one JSON / JSON Lines reader and writer (`ifeval_scorer.jsonl`, `capsule.jsonio`): what it reads
back, what it refuses, and that every reader of the code base now splits lines on `\\n` only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from capsule.atomic import append_jsonl_durable, write_json_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.jsonio import parse_json, read_json, read_jsonl, read_jsonl_complete
from ifeval_scorer.jsonl import (
    MAX_DEPTH,
    JsonInputError,
    dumps_document,
    dumps_line,
    loads_document,
    parse_lines,
)

SEPARATORS = "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg\x1dh\x1ei\r"  # every str.splitlines() boundary but \n


def test_line_separators_inside_strings_round_trip(tmp_path: Path) -> None:
    rows = [{"key": 1, "response": SEPARATORS}, {"key": 2, "response": "plain"}]
    path = tmp_path / "g.jsonl"
    append_jsonl_durable(path, rows)
    assert "\u2028" in path.read_text(encoding="utf-8")  # written raw (ensure_ascii=False), not escaped
    assert read_jsonl_complete(path) == rows
    assert [value for _, value in parse_lines(path.read_text(encoding="utf-8"), "g")] == rows


def test_the_scorer_reads_a_response_with_separators(tmp_path: Path, prompts_path: Path) -> None:
    from ifeval_scorer import load_prompts
    from ifeval_scorer.inputs import read_generations

    prompts = load_prompts(prompts_path)
    key = min(prompts)
    path = tmp_path / "g.jsonl"
    path.write_text(dumps_line({"key": key, "response": SEPARATORS}), encoding="utf-8")
    assert [r.response for r in read_generations(path, prompts)] == [SEPARATORS]


def test_compliant_answers_with_separators_are_read(tmp_path: Path) -> None:
    from capsule.analysis.scorer_controls import load_compliant

    path = tmp_path / "compliant.jsonl"
    path.write_text(dumps_line({"key": 5, "response": SEPARATORS}), encoding="utf-8")
    assert load_compliant(path) == [{"key": 5, "response": SEPARATORS}]


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, -3e-7, None, True], "b": {"c": "\u2028\U0001f600"}},
        [[[]]],
        "text",
        0,
        {"n": 10**39},
    ],
)
def test_what_the_writer_writes_the_reader_reads(value: object, tmp_path: Path) -> None:
    assert loads_document(dumps_document(value), "doc") == value
    assert [v for _, v in parse_lines(dumps_line(value) + dumps_line(value, compact=True), "f")] == [
        value,
        value,
    ]
    write_json_atomic(tmp_path / "x.json", value)
    assert read_json(tmp_path / "x.json", "test file") == value


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), {"deep": json.loads("[" * 70 + "]" * 70)}, 10**41]
)
def test_the_writer_refuses_what_the_reader_would(value: object) -> None:
    with pytest.raises(ValueError, match="strict JSON"):
        dumps_line(value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 100_000, "nested deeper than 64"),
        ('{"a": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}", "nested deeper"),
        ('{"key": ' + "9" * 5000 + "}", "a number of 5000 characters"),
        ('{"key": 1, "key": 2}', "a field appears twice"),
        ('{"x": NaN}', "NaN is not JSON"),
        ('{"x": -Infinity}', "-Infinity is not JSON"),
        ('{"x": 1e999}', "out of range"),
        ('{"x": "\\ud800"}', "lone surrogate"),
        ('{"x": 1,}', "not valid JSON"),
        ('{"a\\q": ' + "[" * 70, "nested deeper than 64 levels \\(field 'a\\\\\\\\q'\\)"),
    ],
)
def test_the_reader_refuses_with_one_line(text: str, problem: str) -> None:
    with pytest.raises(JsonInputError, match=problem) as caught:
        loads_document(text, "f.json")
    assert str(caught.value).startswith("f.json")
    assert "\n" not in str(caught.value)


def test_errors_name_the_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"key": 1}\n\n{"row": {"deep": ' + "[" * 80 + "]" * 80 + "}}\n", encoding="utf-8")
    with pytest.raises(
        BadInputError, match=r"g\.jsonl:3: nested deeper than 64 levels \(field 'row\.deep'\)"
    ):
        read_jsonl(path, "generations file")
    path.write_text('{"key": 1}\n{"key": 2, "key": 3}\n', encoding="utf-8")
    with pytest.raises(
        BadInputError, match=r"g\.jsonl:2: a field appears twice in one object \(field 'key'\)"
    ):
        read_jsonl(path, "generations file")
    document = tmp_path / "m.json"
    document.write_text('{\n  "a": 1,\n  "b": ' + "7" * 50 + "\n}\n", encoding="utf-8")
    with pytest.raises(VerificationError, match=r"m\.json:3: a number of 50 characters .*field 'b'"):
        read_json(document, "bundle.json", error=VerificationError)


def test_torn_tails() -> None:
    assert parse_lines('{"a": 1}\n{"a"', "f", torn_tail="drop") == [(1, {"a": 1})]
    with pytest.raises(JsonInputError, match="f:2: not valid JSON"):
        parse_lines('{"a": 1}\n{"a"', "f", torn_tail="keep")
    with pytest.raises(JsonInputError, match="f:2: the last line has no newline"):
        parse_lines('{"a": 1}\n{"a": 2}', "f", torn_tail="error")
    assert parse_lines('{"a": 1}\r\n\r\n', "f") == [(1, {"a": 1})]


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="is a directory"):
        read_json(tmp_path, "manifest")
    with pytest.raises(BadInputError, match="manifest not found"):
        read_json(tmp_path / "missing.json", "manifest")
    (tmp_path / "bad.json").write_bytes(b'{"a":\n "\xff"}')
    with pytest.raises(BadInputError, match=r"bad\.json:2: the manifest is not UTF-8 text"):
        read_json(tmp_path / "bad.json", "manifest")
    with pytest.raises(VerificationError, match="payload: not UTF-8"):
        parse_json(b"\xff", "payload", error=VerificationError)


def test_keys_must_be_ascii_digits(tmp_path: Path, prompts_path: Path) -> None:
    from ifeval_scorer import ScorerInputError, load_prompts
    from ifeval_scorer.inputs import read_generations

    prompts = load_prompts(prompts_path)
    key = min(prompts)
    path = tmp_path / "g.jsonl"
    path.write_text(dumps_line({"key": str(key), "response": "x"}), encoding="utf-8")
    assert read_generations(path, prompts)[0].key == key
    for digits in (
        str(key).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")),
        str(key).translate(str.maketrans("0123456789", "０１２３４５６７８９")),
    ):
        path.write_text(dumps_line({"key": digits, "response": "x"}), encoding="utf-8")
        with pytest.raises(ScorerInputError, match="ASCII digits 0-9 only"):
            read_generations(path, prompts)
    path.write_text("", encoding="utf-8")
    with pytest.raises(ScorerInputError, match="holds no rows"):
        read_generations(path, prompts)


def test_the_reader_is_light() -> None:
    """`capsule.jsonio` (every capsule command) pulls no scorer module but the reader, its parser and
    its errors."""
    import subprocess

    code = (
        "import sys, capsule.jsonio; print(sorted(m for m in sys.modules if m.startswith('ifeval_scorer')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = ["ifeval_scorer", "ifeval_scorer.errors", "ifeval_scorer.jsonl", "ifeval_scorer.strict_json"]
    assert out.strip() == str(expected)


@pytest.mark.parametrize(
    "line",
    [
        '{"key": "1019", "batch_index": 1}',
        '{"key": 1019, "batch_index": true}',
        "[1019, 1]",
        '{"key": 1019, "key": 1019, "batch_index": 1}',
        '{"key": ' + "9" * 5000 + ', "batch_index": 1}',
        '{"raw": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"key": 1019, "batch_index": 1, "raw": NaN}',
    ],
)
def test_a_stored_arm_with_bad_rows_is_refused_in_one_line(tmp_path: Path, line: str) -> None:
    from capsule.generation.arm_sidecar import PARTIAL, Segment, Sidecar, write_sidecar
    from capsule.generation.store import ArmStore
    from capsule.hashing import sha256_json
    from capsule.run_dir import RunDir

    store = ArmStore(RunDir(tmp_path), "arm")
    store.rows_path.parent.mkdir(parents=True)
    identity = {"arm": "arm"}
    write_sidecar(store.meta_path, Sidecar(
        arm={}, identity=identity, identity_sha256=sha256_json(identity), plan_hash="p", started_at="t",
        manifest_digest="d", status=PARTIAL, segments=(Segment("t", "d"),),
    ))
    store.rows_path.write_text(line + "\n", encoding="utf-8")
    before = store.rows_path.read_bytes()
    with pytest.raises(BadInputError) as caught:
        store.open(identity, [])
    assert str(store.rows_path) in str(caught.value) and "\n" not in str(caught.value)
    assert store.rows_path.read_bytes() == before


# ---- issue 26, finding 8: the one reader reads regular files only, of bounded size ------------------


@pytest.mark.parametrize("kind", ["fifo", "device", "oversize"])
def test_the_reader_refuses_what_would_hang_or_exhaust_memory(tmp_path: Path, kind: str) -> None:
    from capsule.jsonio import MAX_INPUT_BYTES, read_input_bytes

    path = tmp_path / "input"
    if kind == "fifo":
        import os

        os.mkfifo(path)  # opened without blocking: no writer is needed to refuse it
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        with open(path, "wb") as handle:
            handle.truncate(MAX_INPUT_BYTES + 1)  # sparse: no disk used
    expected = "more than" if kind == "oversize" else "not a regular file"
    with pytest.raises(BadInputError, match=expected):
        read_input_bytes(path, "input")
    with pytest.raises(BadInputError, match=expected):
        read_jsonl(path, "JSON Lines file")
    with pytest.raises(VerificationError, match=expected):
        read_json(path, "bundle.json", error=VerificationError)

"""The bad-input corpus: over a thousand malformed inputs to the capsule's loaders, generated here.

Each `Case` names the loader it aims at, the files it lays over a valid base workspace (the
committed reference run, the smoke plan sealed into a fresh ledger, ...), the `capsule` command line
to run and the exit code it must end with (2 bad input, 3 failed verification). The test
(`test_bad_input_corpus.py`) runs every case in-process and checks: no traceback, that exit code,
one `Error:` line, and not one byte or mtime changed in the workspace.

    python tests/corpus/corpus_cases.py --count     # the number of cases by loader

Loaders: `generations` (`capsule score`, through the scorer's reader), `plan` (`capsule prereg
seal`: plan.toml and its compliant answers), `ledger` (`capsule prereg verify`), `bundle` (`capsule
verify`: bundle.json and the DSSE envelope), `manifest` (`capsule manifest diff`, and a run's
manifest in `capsule report`), `analysis` (analysis.json in `capsule report`).
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capsule.evidence.committed_runs import read_committed_runs
from capsule.prereg.arms import ARM_KEYS, DECODING_KEYS
from capsule.prereg.loader import (
    CLAIM_KEYS,
    COMPARISON_KEYS,
    MODEL_KEYS,
    PLAN_KEYS,
    PROMPTS_KEYS,
    VERDICT_KEYS,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_issue38  # noqa: E402
import corpus_sweep  # noqa: E402
import corpus_toml  # noqa: E402
from corpus_files import Special  # noqa: E402
from corpus_json import dumps, field_variants, nested, text_variants  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REFERENCE_RUN = read_committed_runs(REPO).run("v3-imported").path  # by name, never "the first found"
SMOKE_PLAN = REPO / "prereg" / "smoke"
DIRECTORY = None  # in Case.files: make a directory at that path

#: Values of the wrong JSON type for a field whose right type is the key.
WRONG: dict[type, tuple[Any, ...]] = {
    str: (7, None, [], {}, True),
    int: ("7", None, [], 1.5),
    float: ("x", None, []),
    bool: ("x", 2, None),
    list: ("x", 3, {}, None),
    dict: ("x", 3, [], None),
}
#: The same for TOML (which has no null).
WRONG_TOML: dict[type, tuple[Any, ...]] = {
    str: (7, [], {"a": 1}, True),
    int: ("7", [], 1.5),
    float: ("x", []),
    bool: ("x", 2),
    list: ("x", 3),
    dict: ("x", 3),
}


@dataclass(frozen=True)
class Case:
    """One malformed input: files laid over a base workspace, a command line, its exit code."""

    loader: str
    label: str
    base: str
    files: tuple[tuple[str, bytes | Special | None], ...]
    args: tuple[str, ...]
    exit_code: int
    xfail: str | None = None

    @property
    def id(self) -> str:
        return f"{self.loader}: {self.label}"


@dataclass(frozen=True)
class Bases:
    """The valid inputs every case breaks one thing of (read from the base workspaces)."""

    rows: list[dict[str, Any]]
    plan: dict[str, Any]
    compliant: list[dict[str, Any]]
    ledger_lines: list[bytes]
    bundle: dict[str, Any]
    envelope: dict[str, Any]
    manifest: dict[str, Any]
    analysis: dict[str, Any]
    harness: dict[str, list[dict[str, Any]]]


# ---- the base workspaces -----------------------------------------------------------------------


def build_workspaces(root: Path) -> dict[str, Path]:
    """Create one valid workspace per base under `root`; return {base name: its directory}."""
    from click.testing import CliRunner

    from capsule.cli import cli

    spaces = {name: root / name for name in ("generations", "plan", "ledger", "bundle", "manifest", "report")}
    for path in spaces.values():
        path.mkdir(parents=True)
    rows = (REFERENCE_RUN / "generations" / "primary.jsonl").read_text(encoding="utf-8").split("\n")[:3]
    (spaces["generations"] / "g.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (spaces["generations"] / "a-file").write_text("not a directory\n", encoding="utf-8")
    for name in ("plan", "ledger"):
        shutil.copytree(SMOKE_PLAN, spaces[name] / "prereg" / "smoke")
    ledger = spaces["ledger"] / "prereg" / "ledger.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "prereg",
            "seal",
            str(ledger.parent / "smoke" / "plan.toml"),
            "--note",
            "corpus base",
            "--ledger",
            str(ledger),
        ],
    )
    if result.exit_code != 0:
        raise RuntimeError(f"cannot seal the corpus's base plan: {result.output}")
    shutil.copytree(REFERENCE_RUN, spaces["bundle"] / "run")
    shutil.copy(REPO / "prereg" / "ledger.jsonl", spaces["bundle"] / "ledger.jsonl")
    shutil.copy(REFERENCE_RUN / "manifest.json", spaces["manifest"] / "a.json")
    shutil.copy(REFERENCE_RUN / "manifest.json", spaces["manifest"] / "b.json")
    (spaces["report"] / "run").mkdir()
    for name in ("analysis.json", "manifest.json"):
        shutil.copy(REFERENCE_RUN / name, spaces["report"] / "run" / name)
    corpus_sweep.build_sweep_workspaces(root, spaces, REFERENCE_RUN)
    return spaces


def read_bases(spaces: dict[str, Path]) -> Bases:
    """The valid inputs, as read from the workspaces `build_workspaces` made."""

    def load(path: Path) -> Any:
        return json.loads(path.read_text(encoding="utf-8"))

    gens = spaces["generations"] / "g.jsonl"
    plan_dir = spaces["plan"] / "prereg" / "smoke"
    return Bases(
        rows=[json.loads(line) for line in gens.read_text(encoding="utf-8").split("\n") if line],
        plan=tomllib.loads((plan_dir / "plan.toml").read_text(encoding="utf-8")),
        compliant=[
            json.loads(line)
            for line in (plan_dir / "controls" / "compliant.jsonl").read_text(encoding="utf-8").split("\n")
            if line
        ],
        ledger_lines=(spaces["ledger"] / "prereg" / "ledger.jsonl").read_bytes().split(b"\n")[:-1],
        bundle=load(spaces["bundle"] / "run" / "bundle.json"),
        envelope=load(spaces["bundle"] / "run" / "bundle.dsse.json"),
        manifest=load(spaces["manifest"] / "a.json"),
        analysis=load(spaces["report"] / "run" / "analysis.json"),
        harness=corpus_sweep.harness_rows(spaces["harness"]),
    )


# ---- generations: `capsule score` ----------------------------------------------------------------

SCORE = ("score", "{w}/g.jsonl")


def _jsonl(rows: list[bytes]) -> bytes:
    return b"".join(row + b"\n" for row in rows)


def generations_cases(bases: Bases) -> Iterator[Case]:
    """Rows of a generations file broken one at a time (first, middle, last row), and whole files."""
    rows = [dumps(row).encode() for row in bases.rows]

    def case(label: str, data: bytes, args: tuple[str, ...] = SCORE, code: int = 2) -> Case:
        return Case("generations", label, "generations", (("g.jsonl", data),), args, code)

    for position in range(len(rows)):
        row = bases.rows[position]

        def put(line: bytes, position: int = position) -> bytes:
            return _jsonl(rows[:position] + [line] + rows[position + 1 :])

        where = f"row {position + 1}"
        for label, line in text_variants(dumps(row)):
            if b"\n" in line.rstrip(b"\n"):
                continue
            yield case(f"{where} {label}", put(line))
        if position != 1:  # the schema cases once, on the middle row
            continue
        for label, line in field_variants(row):
            yield case(f"{where} {label}", put(line))
        keys: list[Any] = [
            "\uff11\uff10\uff11\uff19",
            "\u0661\u0660\u0661\u0669",
            "\u0967\u0966",
            "12a",
            "-5",
            "1e3",
            "",
            " ",
            "0x10",
            1019.0,
            True,
            False,
            None,
            [],
            {},
            [1019],
            -1,
            0,
            99_999_999,
        ]
        for key in keys:
            yield case(f"{where} key {key!r}", put(dumps({**row, "key": key}).encode()))
        for response in (None, 7, [], {}, True, ["a"]):
            yield case(f"{where} response {response!r}", put(dumps({**row, "response": response}).encode()))
        for field in ("key", "response"):
            yield case(
                f"{where} without {field}", put(dumps({k: v for k, v in row.items() if k != field}).encode())
            )
        for top in ([], "text", 7, None, True, [row]):
            yield case(f"{where} is {json.dumps(top)[:20]}", put(dumps(top).encode()))
        other = bases.rows[(position + 1) % len(rows)]
        yield case(f"{where} repeats a key", put(dumps({**row, "key": other["key"]}).encode()))
        prompt_less = {k: v for k, v in row.items() if k != "key"}
        yield case(
            f"{where} unknown prompt text", put(dumps({**prompt_less, "prompt": "no such prompt"}).encode())
        )
    for label, data in (
        ("empty file", b""),
        ("only newlines", b"\n\n\n"),
        ("only spaces", b"   \n \t \n"),
        ("only a CR", b"\r\n"),
        ("U+2028 alone", "\u2028\n".encode()),
        ("NUL bytes", b"\x00\x00\n"),
        ("a JSON array of rows", dumps(bases.rows).encode()),
        ("rows glued on one line", b" ".join(rows) + b"\n"),
        ("rows separated by U+2028", "\u2028".encode().join(rows) + b"\n"),
        ("rows separated by CR only", b"\r".join(rows) + b"\n"),
        ("JSON text sequence (RS)", b"".join(b"\x1e" + row + b"\n" for row in rows)),
        ("UTF-16 file", _jsonl(rows).decode().encode("utf-16")),
        ("gzip magic", b"\x1f\x8b\x08\x00" + _jsonl(rows)),
    ):
        yield case(label, data)
    valid = _jsonl(rows)
    yield Case(
        "generations",
        "output under a file",
        "generations",
        (("g.jsonl", valid),),
        (*SCORE, "-o", "{w}/a-file/out.jsonl"),
        2,
    )
    yield Case(
        "generations",
        "output deeper under a file",
        "generations",
        (("g.jsonl", valid),),
        (*SCORE, "-o", "{w}/a-file/x/y/out.jsonl"),
        2,
    )
    yield Case(
        "generations", "output is a directory", "generations", (("g.jsonl", valid),), (*SCORE, "-o", "{w}"), 2
    )
    yield Case(
        "generations",
        "output is the input",
        "generations",
        (("g.jsonl", valid),),
        (*SCORE, "-o", "{w}/g.jsonl"),
        2,
    )
    yield Case(
        "generations",
        "generations file is a directory",
        "generations",
        (("gdir", DIRECTORY),),
        ("score", "{w}/gdir"),
        2,
    )
    yield Case(
        "generations", "generations file missing", "generations", (), ("score", "{w}/missing.jsonl"), 2
    )


def output_cases(bases: Bases) -> Iterator[Case]:
    """Commands told to write under a regular file: refused before anything is written."""
    for label, args in (
        ("keygen key directory under a file", ("keygen", "--out", "{w}/a-file/keys")),
        ("keygen key directory is a file", ("keygen", "--out", "{w}/a-file")),
        (
            "generate run directory under a file",
            ("generate", "--backend", "fake", "--first", "2", "--out", "{w}/a-file/run"),
        ),
        (
            "generate run directory is a file",
            ("generate", "--backend", "fake", "--first", "2", "--out", "{w}/a-file"),
        ),
        ("manifest written under a file", ("manifest", "--out", "{w}/a-file/m.json")),
    ):
        yield Case("output", label, "generations", (), args, 2)


# ---- plans: `capsule prereg seal` ----------------------------------------------------------------

PLAN_FILE = "prereg/smoke/plan.toml"
COMPLIANT_FILE = "prereg/smoke/controls/compliant.jsonl"
SEAL = ("prereg", "seal", "{w}/" + PLAN_FILE, "--note", "corpus", "--ledger", "{w}/prereg/ledger.jsonl")

#: Keys each section requires, as the loader declares them: deleting one is an error.
REQUIRED = {
    (): PLAN_KEYS[0],
    ("model",): MODEL_KEYS[0],
    ("claim",): CLAIM_KEYS[0],
    ("prompts",): PROMPTS_KEYS[0],
    ("arms", 0): ARM_KEYS[0],
    ("arms", 0, "decoding"): DECODING_KEYS[0],
    ("verdict",): VERDICT_KEYS[0],
    ("controls", 0): ("name", "kind", "arms"),
    ("comparisons", 0): COMPARISON_KEYS[0],
}
#: Plans refused by the plan bounds and the pinned-prompt check (each with the rule that refuses it).
PENDING_PLAN_CASES: tuple[tuple[str, tuple[Any, ...], str, Any, str], ...] = (
    ("verdict.bootstrap_resamples = 10**12", ("verdict",), "bootstrap_resamples", 10**12, "resource bounds"),
    ("controls.5 (scorer stability) k = 10**9", ("controls", 5), "k", 10**9, "resource bounds"),
    ("prompts.sha256 not the pinned file", ("prompts",), "sha256", "ab" * 32, "the pinned-prompts check"),
)
#: Values of the right type that a plan must still refuse.
BAD_PLAN_VALUES: tuple[tuple[str, tuple[Any, ...], str, Any], ...] = (
    ("arms.0.env sets LD_PRELOAD", ("arms", 0), "env", {"LD_PRELOAD": "/tmp/x.so"}),
    ("arms.0.env sets PATH", ("arms", 0), "env", {"PATH": "/tmp"}),
    ("arms.0.name with a slash", ("arms", 0), "name", "../escape"),
    ("arms.0.name absolute", ("arms", 0), "name", "/abs"),
    ("arms.0.batch_size 0", ("arms", 0), "batch_size", 0),
    ("arms.0.batch_size -4", ("arms", 0), "batch_size", -4),
    ("arms.0.backend bogus", ("arms", 0), "backend", "bogus"),
    ("arms.0.dtype bogus", ("arms", 0), "dtype", "float8"),
    ("arms.0.decoding.temperature -1", ("arms", 0, "decoding"), "temperature", -1.0),
    ("verdict.confidence 1.5", ("verdict",), "confidence", 1.5),
    ("model.files empty", ("model",), "files", {}),
    ("prompts.sha256 short", ("prompts",), "sha256", "abc"),
)
#: Fields whose every value is checked only by D's bounds (not this loader); kept out of type cases.
FREE_TEXT = {("claim", "source")}


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def plan_cases(bases: Bases) -> Iterator[Case]:
    """plan.toml broken as text, one field of the wrong type, a required key gone, an unknown key
    added; and the plan's compliant-answers file broken like a generations file."""

    def case(label: str, data: bytes, name: str = PLAN_FILE) -> Case:
        return Case("plan", label, "plan", ((name, data),), SEAL, 2)

    text = corpus_toml.dumps(bases.plan)
    data = text.encode()
    for fraction in (1, 2, 3, 4):
        yield case(f"truncated at {fraction}/5", data[: len(data) * fraction // 5])
    middle = len(data) // 2
    yield case("invalid UTF-8", data[:middle] + b"\xff" + data[middle:])
    yield case("NUL byte", data[:middle] + b"\x00" + data[middle:])
    yield case("UTF-16", text.encode("utf-16"))
    yield case("empty file", b"")
    yield case("only a comment", b"# nothing\n")
    yield case("a JSON plan", dumps(bases.plan).encode())
    yield case("repeated key", b'name = "again"\n' + data)
    yield case("repeated table", data + b"\n[model]\nname = 'x'\n")
    yield case("unclosed string", b'description = "open\n' + data)
    yield case("unclosed array", b"other = [1, 2\n" + data)
    for depth in (100, 1_500, 5_000):
        yield case(f"arrays nested {depth} deep", f"deep = {'[' * depth}{']' * depth}\n".encode() + data)
        yield case(
            f"inline tables nested {depth} deep", f"deep = {'{a = ' * depth}1{'}' * depth}\n".encode() + data
        )
    for digits in (41, 5_000, 10_000):
        plan = copy.deepcopy(bases.plan)
        plan["scorer_seed"] = int("9" * min(digits, 4_000))
        if digits <= 4_000:
            yield case(f"scorer_seed of {digits} digits", corpus_toml.dumps(plan).encode())
        else:
            yield case(
                f"scorer_seed of {digits} digits",
                data.replace(b"scorer_seed = 0", b"scorer_seed = " + b"9" * digits),
            )
    for section, required in REQUIRED.items():
        table = _at(bases.plan, section)
        where = ".".join(str(p) for p in section) or "top level"
        for key in required:
            plan = copy.deepcopy(bases.plan)
            del _at(plan, section)[key]
            yield case(f"{where} without {key}", corpus_toml.dumps(plan).encode())
        plan = copy.deepcopy(bases.plan)
        _at(plan, section)["no_such_key"] = 1
        yield case(f"{where} with an unknown key", corpus_toml.dumps(plan).encode())
        for key, value in table.items():
            if (*section, key) in FREE_TEXT:
                continue
            for wrong in WRONG_TOML[type(value)]:
                plan = copy.deepcopy(bases.plan)
                _at(plan, section)[key] = wrong
                yield case(f"{where}.{key} = {json.dumps(wrong)}", corpus_toml.dumps(plan).encode())
    for top in ("arms", "controls", "comparisons"):
        for wrong in ("x", 3, [1], [[]]):
            plan = copy.deepcopy(bases.plan)
            plan[top] = wrong
            yield case(f"{top} = {json.dumps(wrong)}", corpus_toml.dumps(plan).encode())
    for label, section, key, wrong in BAD_PLAN_VALUES:
        plan = copy.deepcopy(bases.plan)
        _at(plan, section)[key] = wrong
        yield case(label, corpus_toml.dumps(plan).encode())
    for label, section, key, wrong, _needs in PENDING_PLAN_CASES:  # refused since the plan bounds landed
        plan = copy.deepcopy(bases.plan)
        _at(plan, section)[key] = wrong
        yield case(label, corpus_toml.dumps(plan).encode())  # refused since the plan bounds landed
    rows = [dumps(row).encode() for row in bases.compliant]
    row = bases.compliant[0]

    def compliant(label: str, line: bytes) -> Case:
        return case(f"compliant.jsonl {label}", _jsonl([line] + rows[1:]), COMPLIANT_FILE)

    for label, line in field_variants(row):
        yield compliant(label, line)
    for label, line in text_variants(dumps(row)):
        if b"\n" not in line.rstrip(b"\n"):
            yield compliant(label, line)
    for key in ("1019", "\uff11\uff10\uff11\uff19", 1019.0, True, None, []):
        yield compliant(f"key {key!r}", dumps({**row, "key": key}).encode())
    for response in (None, 7, []):
        yield compliant(f"response {response!r}", dumps({**row, "response": response}).encode())
    yield compliant("an extra field", dumps({**row, "extra": 1}).encode())
    yield compliant("a repeated key", _jsonl([rows[0], rows[0]]))
    yield case("compliant.jsonl empty", b"", COMPLIANT_FILE)


# ---- the ledger: `capsule prereg verify` ---------------------------------------------------------

LEDGER_FILE = "prereg/ledger.jsonl"
VERIFY_LEDGER = ("prereg", "verify", "--ledger", "{w}/" + LEDGER_FILE)


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _rehashed(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with its `hash` recomputed (what a forger who edits a field does)."""
    import hashlib

    body = {k: v for k, v in entry.items() if k != "hash"}
    return {**body, "hash": hashlib.sha256(_canonical(body)).hexdigest()}


def ledger_cases(bases: Bases) -> Iterator[Case]:
    """Each entry broken as text, a field the reader refuses, a field of the wrong type (rehashed, so
    only the type check can catch it), and the file broken whole."""
    lines = bases.ledger_lines

    def case(label: str, data: bytes, code: int = 3) -> Case:
        return Case("ledger", label, "ledger", ((LEDGER_FILE, data),), VERIFY_LEDGER, code)

    for position, line in enumerate(lines):
        entry = json.loads(line)
        where = f"entry {position + 1}"

        def put(new: bytes, position: int = position) -> bytes:
            return _jsonl(lines[:position] + [new] + lines[position + 1 :])

        if position == len(lines) - 1:  # the plan's entry, with the most fields
            for label, new in field_variants(entry):
                yield case(f"{where} {label}", put(new.replace(b", ", b",").replace(b": ", b":")))
        for label, new in text_variants(line.decode()):
            if b"\n" not in new.rstrip(b"\n"):
                yield case(f"{where} {label}", put(new))
        for field, value in entry.items():
            wrongs: tuple[Any, ...] = ("1", None, [], 1.5) if field == "seq" else WRONG[type(value)]
            for wrong in wrongs:
                if field == "hash":  # a hash of the wrong type: nothing to recompute
                    yield case(
                        f"{where} hash = {json.dumps(wrong)}", put(_canonical({**entry, "hash": wrong}))
                    )
                    continue
                forged = _rehashed({**entry, field: wrong})
                yield case(f"{where} {field} = {json.dumps(wrong)} (rehashed)", put(_canonical(forged)))
            if field == "companions":  # optional: an entry without it is valid
                continue
            without = {k: v for k, v in entry.items() if k != field}
            yield case(
                f"{where} without {field}" + (" (rehashed)" if field != "hash" else ""),
                put(_canonical(_rehashed(without) if field != "hash" else without)),
            )
        for companions in ("x", 3, [], None, ["a"], {"a": 1}, {"a": []}, {"a": None}):
            forged = _rehashed({**entry, "companions": companions})
            yield case(f"{where} companions = {json.dumps(companions)} (rehashed)", put(_canonical(forged)))
        for path in ("/etc/passwd", "../x", "a\\b", "", "./a"):
            forged = _rehashed({**entry, "path": path})
            yield case(f"{where} path {path!r} (rehashed)", put(_canonical(forged)))
        yield case(f"{where} not canonical (spaces)", put(dumps(entry).encode()))
        yield case(f"{where} is an array", put(b"[" + line + b"]"))
        yield case(f"{where} blank line before it", _jsonl(lines[:position] + [b""] + lines[position:]))
        yield case(f"{where} CRLF", put(line + b"\r"))
        yield case(f"{where} deleted (a chain gap)", _jsonl(lines[:position] + lines[position + 1 :]))
    yield case("no newline after the last entry", _jsonl(lines).rstrip(b"\n"))
    yield case("lines reversed", _jsonl(lines[::-1]))
    yield case("lines joined by U+2028", "\u2028".encode().join(lines) + b"\n")
    yield case("a whole JSON array", dumps([json.loads(line) for line in lines]).encode())
    yield case("nested 100000 deep", nested(100_000).encode() + b"\n")
    yield Case(
        "ledger",
        "ledger path is a directory",
        "ledger",
        (("prereg/a-dir", DIRECTORY),),
        ("prereg", "verify", "--ledger", "{w}/prereg/a-dir"),
        2,
    )


# ---- bundles: `capsule verify` -------------------------------------------------------------------

VERIFY_RUN = ("verify", "{w}/run", "--ledger", "{w}/ledger.jsonl")
#: bundle.json's checked fields, by path, and their types.
BUNDLE_FIELDS = (
    ("schema",),
    ("run_id",),
    ("plan",),
    ("manifest_digest",),
    ("ledger_heads",),
    ("key",),
    ("files",),
    ("plan", "path"),
    ("plan", "sha256"),
    ("ledger_heads", "at_start"),
    ("key", "fingerprint"),
    ("files", 0),
    ("files", 0, "path"),
    ("files", 0, "sha256"),
    ("files", 0, "size"),
)


def bundle_cases(bases: Bases) -> Iterator[Case]:
    """bundle.json and bundle.dsse.json broken as text, by a refused value, or by a wrong type."""

    def case(label: str, name: str, data: bytes) -> Case:
        return Case("bundle", label, "bundle", ((f"run/{name}", data),), VERIFY_RUN, 3)

    for name, document in (("bundle.json", bases.bundle), ("bundle.dsse.json", bases.envelope)):
        text = dumps(document, indent=2) + "\n"
        for label, data in field_variants(document, indent=2):
            yield case(f"{name} {label}", name, data)
        for label, data in text_variants(text):
            yield case(f"{name} {label}", name, data)
        for top in ([], "text", 7, None, {}):
            yield case(f"{name} is {json.dumps(top)}", name, dumps(top).encode())
        for field in sorted(document):
            yield case(
                f"{name} without {field}",
                name,
                dumps({k: v for k, v in document.items() if k != field}, indent=2).encode(),
            )
    for path in BUNDLE_FIELDS:
        value = _at(bases.bundle, path)
        for wrong in WRONG[type(value)]:
            bundle = copy.deepcopy(bases.bundle)
            _at(bundle, path[:-1])[path[-1]] = wrong
            label = ".".join(str(p) for p in path)
            yield case(
                f"bundle.json {label} = {json.dumps(wrong)}", "bundle.json", dumps(bundle, indent=2).encode()
            )
    signature = bases.envelope["signatures"][0]
    for signatures in (
        "x",
        {},
        [1],
        [[]],
        [{**signature, "keyid": 7}],
        [{**signature, "sig": 7}],
        [{**signature, "keyid": None}],
        [{"sig": signature["sig"]}],
        [{"keyid": signature["keyid"]}],
        [{**signature, "keyid": ["a"]}],
        [],
    ):
        envelope = {**bases.envelope, "signatures": signatures}
        yield case(
            f"bundle.dsse.json signatures = {json.dumps(signatures)[:40]}",
            "bundle.dsse.json",
            dumps(envelope, indent=2).encode(),
        )
    for field in ("payload", "payloadType"):
        for wrong in WRONG[str]:
            envelope = {**bases.envelope, field: wrong}
            yield case(
                f"bundle.dsse.json {field} = {json.dumps(wrong)}",
                "bundle.dsse.json",
                dumps(envelope, indent=2).encode(),
            )
    for payload in ("", "!!!not base64!!!", "bnVsbA==", "W10=", "e30="):  # "", junk, null, [], {}
        envelope = {**bases.envelope, "payload": payload}
        yield case(
            f"bundle.dsse.json payload {payload!r}", "bundle.dsse.json", dumps(envelope, indent=2).encode()
        )


# ---- manifests: `capsule manifest diff` and `capsule report` --------------------------------------

DIFF = ("manifest", "diff", "{w}/a.json", "{w}/b.json")
REPORT = ("report", "{w}/run", "--no-plots")


def manifest_cases(bases: Bases) -> Iterator[Case]:
    """A manifest broken as text, by a refused value, by a wrong type or a missing top-level field;
    through `manifest diff` (either side) and, a subset, through `report`."""

    def diff(label: str, data: bytes, side: str = "a") -> Case:
        return Case("manifest", f"diff {side}: {label}", "manifest", ((f"{side}.json", data),), DIFF, 2)

    def report(label: str, data: bytes) -> Case:
        return Case("manifest", f"report: {label}", "report", (("run/manifest.json", data),), REPORT, 2)

    manifest = bases.manifest
    text = dumps(manifest, indent=2) + "\n"
    for label, data in field_variants(manifest, indent=2):
        yield diff(label, data)
    for label, data in text_variants(text):
        yield diff(label, data)
        yield diff(label, data, "b")
        yield report(label, data)
    for top in ([], "text", 7, None, {}):
        yield diff(f"is {json.dumps(top)}", dumps(top).encode())
        yield report(f"is {json.dumps(top)}", dumps(top).encode())
    for field, value in sorted(manifest.items()):
        without = dumps({k: v for k, v in manifest.items() if k != field}, indent=2).encode()
        yield diff(f"without {field}", without)
        yield report(f"without {field}", without)
        for wrong in WRONG[type(value)]:
            if wrong is None:  # the schema lets some fields be null (no model, no GPU system)
                continue
            yield diff(f"{field} = {json.dumps(wrong)}", dumps({**manifest, field: wrong}, indent=2).encode())
    for version in (0, 999, "1", None):
        yield diff(f"schema_version {version!r}", dumps({**manifest, "schema_version": version}).encode())


def analysis_cases(bases: Bases) -> Iterator[Case]:
    """analysis.json (read by `capsule report`) broken as text, by a refused value, a wrong type at
    the top, or a missing top-level field."""

    def case(label: str, data: bytes) -> Case:
        return Case("analysis", label, "report", (("run/analysis.json", data),), REPORT, 2)

    analysis = bases.analysis
    for label, data in field_variants(analysis, indent=2):
        yield case(label, data)
    for label, data in text_variants(dumps(analysis, indent=2) + "\n"):
        yield case(label, data)
    for top in ([], [analysis], "text", 7, None, {}):
        yield case(f"is {json.dumps(top)[:30]}", dumps(top).encode())
    for field in ("claim", "arms", "headline", "plan", "schema", "verdict_rule"):
        yield case(
            f"without {field}", dumps({k: v for k, v in analysis.items() if k != field}, indent=2).encode()
        )
        for wrong in ("x", 3, None):
            yield case(f"{field} = {json.dumps(wrong)}", dumps({**analysis, field: wrong}, indent=2).encode())
    yield case("empty file", b"")


GENERATORS = (
    generations_cases,
    output_cases,
    plan_cases,
    ledger_cases,
    bundle_cases,
    manifest_cases,
    analysis_cases,
)


def _sweep_case(
    loader: str, label: str, base: str, files: tuple[tuple[str, Any], ...], args: tuple[str, ...], code: int
) -> Case:
    return Case(loader, label, base, files, args, code)


def all_cases(bases: Bases) -> list[Case]:
    """Every case, in a stable order, with unique ids."""
    cases = [case for generate in GENERATORS for case in generate(bases)]
    cases += [
        case
        for generate in corpus_sweep.SWEEP_GENERATORS + corpus_issue38.ISSUE38_GENERATORS
        for case in generate(bases, _sweep_case, DIRECTORY)
    ]
    seen: Counter[str] = Counter()
    unique = []
    for case in cases:
        seen[case.id] += 1
        if seen[case.id] > 1:
            case = replace(case, label=f"{case.label} #{seen[case.id]}")
        unique.append(case)
    return unique


def counts(cases: list[Case]) -> dict[str, int]:
    """Cases by loader."""
    return dict(Counter(case.loader for case in cases))


def main() -> None:
    """`--count`: build the base workspaces in a temporary directory and print the cases by loader."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cases = all_cases(read_bases(build_workspaces(Path(tmp))))
    for loader, number in counts(cases).items():
        print(f"{loader:12} {number}")
    print(f"{'total':12} {len(cases)}")


if __name__ == "__main__":
    main()

"""The bad-input corpus, second part: issue 26's sweep of a skeptical user, generated over commands x
bad inputs. Every case is a command line that must end in one `Error:` line and leave its workspace
as it was (so, in particular, write nothing outside its own output):

- `special-input`: every input file of every command replaced by a FIFO (a reader would hang), a
  link to /dev/zero (never ends) or /dev/null, a dangling link, a directory, a sparse file past the
  reader's size bound, bytes that are not UTF-8;
- `special-output`: every output option given a symbolic link, a FIFO, a device, a dangling link;
- `harness`: `import-samples`' nested text fields (JSON or Python text in a string) that the strict
  reader refuses: nesting, long numbers, NaN, sets, calls, repeated keys, lone surrogates;
- `plan-names`: `[model.files]` keys that are paths, and names with a trailing newline;
- `options`: `generate --name`, `--out` inside a run, `plan new`'s numbers (NaN, infinities);
- `resign`: planted re-sign journals (`report RUN --resign`) with links and paths out of scope.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_toml  # noqa: E402
from corpus_files import DEVICE, FIFO, Sparse, Symlink  # noqa: E402

from ifeval_scorer.jsonl import MAX_INPUT_BYTES  # noqa: E402

LM_EVAL, LIGHTEVAL, LEGACY = "lm.jsonl", "le.jsonl", "legacy.jsonl"

#: What a bad input file can be instead of a file of its kind (label, what to lay at its path).
SPECIAL_INPUTS: tuple[tuple[str, Any], ...] = (
    ("a FIFO", FIFO),
    ("a link to /dev/zero", Symlink("/dev/zero")),
    ("a link to /dev/null", Symlink("/dev/null")),
    ("a link to a FIFO", Symlink("{w}/a-fifo")),
    ("a dangling link", Symlink("{w}/no-such-file")),
    ("a directory", None),  # DIRECTORY in the Case's files
    ("a sparse file past the size bound", Sparse(MAX_INPUT_BYTES + 1)),
    ("bytes that are not UTF-8", b"\xff\xfe\x00\x80 not text\n"),
)
#: What a bad output path can be (label, what to lay there, or a fixed path to name instead).
SPECIAL_OUTPUTS: tuple[tuple[str, Any], ...] = (
    ("a link to a file outside", Symlink("{w}/victim/precious.txt")),
    ("a link to a folder outside", Symlink("{w}/victim")),
    ("a dangling link", Symlink("{w}/victim/new-file")),
    ("a FIFO", FIFO),
    ("a link to /dev/null", Symlink("/dev/null")),
    ("a character device", DEVICE),  # a node of our own: a regression must not replace /dev/null
)
#: Nested text fields no reader of ours may turn into a value (each refused, or left as text that
#: the field's type check refuses): too deep, numbers too long or not finite, Python that is no
#: literal (calls, sets, bytes, complex, comprehensions), repeated keys, lone surrogates, NUL.
BAD_NESTED: tuple[str, ...] = (
    "[" * 100_000,
    "{" * 50_000,
    "[" * 199 + "]" * 199,
    "[" * 70 + "1" + "]" * 70,
    "[" + "9" * 5_000 + "]",
    "[" + "9" * 41 + "]",
    "[1e999999]",
    "[-1e999]",
    "[NaN]",
    "[Infinity]",
    "[nan]",
    "{[]: 1}",
    "{1, 2}",
    "{(1, 2): 3}",
    "[" + "-" * 100_000 + "1]",
    "[" + "not " * 50_000 + "1]",
    "[1" + "+1" * 50_000 + "]",
    "[__import__('os').system('true')]",
    "[open('/etc/passwd').read()]",
    "[b'bytes']",
    "[1j]",
    "[x for x in (1, 2)]",
    "[lambda: 0]",
    "[...]",
    "{**{}}",
    "{'a': 1, 'a': 2}",
    '{"a": 1, "a": 2}',
    '["\\ud800"]',
    "['\\ud800']",
    "['\x00']",
    "[1, 2",
    "{'a': }",
    "[" + "'x', " * 10 + "*[1]]",
    "[True or False]",
    "[1 if 1 else 2]",
)


def _deep_set(row: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    broken = copy.deepcopy(row)
    target = broken
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return broken


def build_sweep_workspaces(root: Path, spaces: dict[str, Path], reference_run: Path) -> None:
    """The sweep's bases: `harness` (valid samples files of each layout, three rows each) and
    `resign` (a signed run whose plots/ is gone, so it does not verify and recovery restores, and a
    folder `victim/` outside it that nothing may touch)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
    from harness_fixtures import lighteval_legacy_row, lighteval_row, lm_eval_row, write_jsonl

    from capsule.artifacts.pinned_prompts import fetch_prompts
    from ifeval_scorer import load_prompts

    prompts = list(load_prompts(fetch_prompts(None).path).values())[:3]
    harness = root / "harness"
    harness.mkdir()
    write_jsonl(harness / LM_EVAL, [lm_eval_row(n, p, f"Answer {n}.") for n, p in enumerate(prompts)])
    write_jsonl(harness / LIGHTEVAL, [lighteval_row(p, f"Answer {n}.") for n, p in enumerate(prompts)])
    write_jsonl(harness / LEGACY, [lighteval_legacy_row(p, f"Answer {n}.") for n, p in enumerate(prompts)])
    spaces["harness"] = harness
    resign = root / "resign"
    shutil.copytree(reference_run, resign / "run", ignore=shutil.ignore_patterns("plots"))
    (resign / "victim").mkdir()
    (resign / "victim" / "precious.txt").write_text("keep me\n", encoding="utf-8")
    (resign / "victim" / "arms.png").write_bytes(b"not a plot of this run")
    (resign / "victim" / "undo.json").write_text('{"files": []}\n', encoding="utf-8")
    spaces["resign"] = resign
    for space in spaces.values():  # a FIFO and a folder outside for every workspace to point at
        (space / "victim").mkdir(exist_ok=True)
        (space / "victim" / "precious.txt").write_text("keep me\n", encoding="utf-8")
        from os import mkfifo

        mkfifo(space / "a-fifo")


def harness_rows(space: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows of each base samples file of the `harness` workspace, by file name."""
    return {
        name: [json.loads(line) for line in (space / name).read_text(encoding="utf-8").splitlines() if line]
        for name in (LM_EVAL, LIGHTEVAL, LEGACY)
    }


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


# ---- special files as inputs ---------------------------------------------------------------------

SEAL = ("prereg", "seal", "{w}/prereg/smoke/plan.toml", "--note", "x", "--ledger", "{w}/prereg/ledger.jsonl")
VERIFY = ("verify", "{w}/run", "--ledger", "{w}/ledger.jsonl")

#: (base, input path in the workspace, command line, its exit code) for every input file.
INPUT_POSITIONS: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("generations", "g.jsonl", ("score", "{w}/g.jsonl"), 2),
    ("generations", "doc.md", ("check-numbers", "{w}/doc.md"), 2),
    ("manifest", "a.json", ("manifest", "diff", "{w}/a.json", "{w}/b.json"), 2),
    ("manifest", "b.json", ("manifest", "diff", "{w}/a.json", "{w}/b.json"), 2),
    ("ledger", "prereg/ledger.jsonl", ("prereg", "verify", "--ledger", "{w}/prereg/ledger.jsonl"), 2),
    (
        "plan",
        "prereg/smoke/plan.toml",
        SEAL,
        2,
    ),
    (
        "plan",
        "prereg/smoke/rationale.md",
        SEAL,
        2,
    ),
    (
        "plan",
        "prereg/smoke/controls/compliant.jsonl",
        SEAL,
        2,
    ),
    (
        "plan",
        "prereg/smoke/plan.toml",
        ("generate", "--plan", "{w}/prereg/smoke/plan.toml", "--arm", "hf-bf16-b4", "--dry-run"),
        2,
    ),
    ("plan", "prereg/smoke/plan.toml", ("fetch", "model", "--plan", "{w}/prereg/smoke/plan.toml"), 2),
    ("bundle", "run/bundle.json", VERIFY, 3),
    ("bundle", "run/bundle.dsse.json", VERIFY, 3),
    ("bundle", "run/bundle.pub.pem", VERIFY, 3),
    ("bundle", "key.pem", ("verify", "{w}/run", "--key", "{w}/key.pem", "--ledger", "{w}/ledger.jsonl"), 3),
    ("report", "run/analysis.json", ("report", "{w}/run", "--no-plots"), 2),
    ("report", "run/manifest.json", ("report", "{w}/run", "--no-plots"), 2),
    ("harness", "in.jsonl", ("import-samples", "lm-eval", "{w}/in.jsonl", "--out", "{w}/out"), 2),
    ("harness", "in.jsonl", ("import-samples", "lighteval", "{w}/in.jsonl", "--out", "{w}/out"), 2),
    (
        "harness",
        "in.jsonl",
        ("import-samples", "lm-eval", "{w}/" + LM_EVAL, "--against", "{w}/in.jsonl", "--out", "{w}/out"),
        2,
    ),
)


#: Where one kind of input ends differently: (input path, kind) -> exit code, or None for no case.
OTHER_ENDINGS: dict[tuple[str, str], int | None] = {
    ("prereg/ledger.jsonl", "bytes that are not UTF-8"): 3,  # evidence that fails to verify
    ("key.pem", "a dangling link"): 2,  # click's own check of --key: missing
    ("key.pem", "a directory"): 2,
    ("run/manifest.json", "a dangling link"): None,  # no manifest is a run `report` renders without one
}


def special_input_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """Every input position of INPUT_POSITIONS given each of SPECIAL_INPUTS."""
    for base, relative, args, code in INPUT_POSITIONS:
        for label, what in SPECIAL_INPUTS:
            ending = OTHER_ENDINGS.get((relative, label), code)
            if ending is None:
                continue
            laid = directory if what is None else what
            yield case(
                "special-input",
                f"{' '.join(args[:2])} with {relative} {label}",
                base,
                ((relative, laid),),
                args,
                ending,
            )


# ---- special files as outputs --------------------------------------------------------------------

#: (base, command line with `{out}` for the output path, its exit code).
OUTPUT_POSITIONS: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("generations", ("score", "{w}/g.jsonl", "--out", "{out}"), 2),
    ("generations", ("manifest", "--out", "{out}"), 2),
    ("generations", ("keygen", "--out", "{out}"), 2),
    ("generations", ("generate", "--backend", "fake", "--first", "1", "--out", "{out}"), 2),
    ("generations", ("generate", "--dry-run", "--first", "1", "--out", "{out}"), 2),
    ("harness", ("import-samples", "lm-eval", "{w}/" + LM_EVAL, "--out", "{out}"), 2),
)


#: Commands whose argument is a run directory, given a FIFO or a device instead (exit code each).
RUN_ARGUMENTS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("verify", "{run}", "--ledger", "{w}/ledger.jsonl"), 2),
    (("report", "{run}", "--no-plots"), 2),
    (("report", "{run}", "--check"), 2),
    (("report", "{run}", "--resign", "--ledger", "{w}/ledger.jsonl"), 2),
    (("compare", "{run}", "{w}/run"), 2),
    (("import-run", "{run}", "--ledger", "{w}/ledger.jsonl"), 2),
)


def run_argument_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """A run-directory argument that is a FIFO or a character device: click lets both through as
    "not a file", so the command itself must refuse them (it used to scan them as directories)."""
    for args, code in RUN_ARGUMENTS:
        for label, path in (("a FIFO", "{w}/a-fifo"), ("/dev/null", "/dev/null")):
            line = tuple(arg.replace("{run}", path) for arg in args)
            label = f"{' '.join(args[:1])} of {label} as the run"
            yield case("special-input", label, "bundle", (), line, code)


def special_output_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """Every output position of OUTPUT_POSITIONS given each of SPECIAL_OUTPUTS."""
    for base, args, code in OUTPUT_POSITIONS:
        for label, what in SPECIAL_OUTPUTS:
            if isinstance(what, str):
                line = tuple(arg.replace("{out}", what) for arg in args)
                files: tuple[Any, ...] = ()
            else:
                line = tuple(arg.replace("{out}", "{w}/out-special") for arg in args)
                files = (("out-special", what),)
            yield case("special-output", f"{' '.join(args[:2])} --out {label}", base, files, line, code)


# ---- import-samples: nested text fields ----------------------------------------------------------

#: (harness, base file, the field's path in a row, the command's harness name).
NESTED_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (LM_EVAL, ("doc",)),
    (LM_EVAL, ("doc", "instruction_id_list")),
    (LM_EVAL, ("prompt_level_strict_acc",)),
    (LM_EVAL, ("inst_level_strict_acc",)),
    (LM_EVAL, ("inst_level_loose_acc",)),
    (LIGHTEVAL, ("doc",)),
    (LIGHTEVAL, ("model_response",)),
    (LIGHTEVAL, ("metric",)),
    (LIGHTEVAL, ("metric", "prompt_level_loose_acc")),
    (LIGHTEVAL, ("metric", "inst_level_strict_acc")),
    (LIGHTEVAL, ("doc", "specific", "instructions_id_list")),
    (LEGACY, ("metrics",)),
)


def harness_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """Each of BAD_NESTED as the text of each of NESTED_FIELDS, in the middle row of its file."""
    for name, path in NESTED_FIELDS:
        rows = bases.harness[name]
        harness = "lm-eval" if name == LM_EVAL else "lighteval"
        for text in BAD_NESTED:
            broken = rows[:1] + [_deep_set(rows[1], path, text)] + rows[2:]
            label = f"{name} {'.'.join(path)} = {text[:24]!r}" + (
                f" ({len(text)} chars)" if len(text) > 24 else ""
            )
            yield case(
                "harness",
                label,
                "harness",
                (("in.jsonl", _jsonl(broken)),),
                ("import-samples", harness, "{w}/in.jsonl", "--out", "{w}/out"),
                2,
            )
    legacy = bases.harness[LEGACY]
    for text in BAD_NESTED[:12]:  # a bad value inside the legacy row's Python-text metrics dict
        metrics = legacy[1]["metrics"].replace(
            "'inst_level_strict_acc': [", f"'inst_level_strict_acc': {text}, 'x': ["
        )
        broken = legacy[:1] + [{**legacy[1], "metrics": metrics}] + legacy[2:]
        yield case(
            "harness",
            f"legacy metrics text holds {text[:24]!r}",
            "harness",
            (("in.jsonl", _jsonl(broken)),),
            ("import-samples", "lighteval", "{w}/in.jsonl", "--out", "{w}/out"),
            2,
        )


# ---- plans: model file names, names with a newline -----------------------------------------------

MODEL_FILE_KEYS = (
    "/etc/passwd",
    "/any/file",
    "../../x",
    "../config.json",
    "a/../../b",
    "sub/config.json",
    "./config.json",
    ".",
    "..",
    "",
    " ",
    "config.json\n",
    "\nconfig.json",
    "con\x00fig.json",
    "a\\b.json",
    ".hidden.json",
    "x" * 256,
    "~/x.json",
    "C:\\x.json",
)
NAMES_WITH_A_NEWLINE = ("x\n", "x\r\n", "\nx", "x\n\n", "x\t", "x ", " x", "X", "x/y", "-x")


def plan_name_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """`prereg seal` of the smoke plan with one `[model.files]` key replaced by a path, or one name
    (the plan's arm, control, comparison) given a newline or another character NAME_RE refuses."""
    seal = SEAL
    for key in MODEL_FILE_KEYS:
        plan = copy.deepcopy(bases.plan)
        files = plan["model"]["files"]
        first = sorted(files)[0]
        files[key] = files.pop(first)
        yield case(
            "plan-names",
            f"model.files key {key[:30]!r}",
            "plan",
            (("prereg/smoke/plan.toml", corpus_toml.dumps(plan).encode()),),
            seal,
            2,
        )
    for section, index in (("arms", 0), ("controls", 0), ("comparisons", 0)):
        for name in NAMES_WITH_A_NEWLINE:
            plan = copy.deepcopy(bases.plan)
            plan[section][index]["name"] = name
            yield case(
                "plan-names",
                f"{section}.{index}.name {name!r}",
                "plan",
                (("prereg/smoke/plan.toml", corpus_toml.dumps(plan).encode()),),
                seal,
                2,
            )
    for label, data in (
        ("empty", b""),
        ("blank", b" \n\t\n"),
        ("not UTF-8", b"# why\n\xff\xfe\n"),
        ("UTF-16", "# why\n".encode("utf-16")),
    ):
        yield case(
            "plan-names", f"rationale.md {label}", "plan", (("prereg/smoke/rationale.md", data),), seal, 2
        )


# ---- command-line options ------------------------------------------------------------------------

BAD_NUMBERS = ("nan", "NaN", "inf", "-inf", "infinity", "0", "-1", "-0.0", "1e309", "-1e309")


def option_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """`generate --name` with names NAME_RE refuses; `generate --out` inside a run (signed or not);
    `plan new` with numbers that are not positive and finite."""
    for name in (*NAMES_WITH_A_NEWLINE, "", ".", "..", "a" * 65, "x\x00", "../x", "/abs", "\u00e9"):
        yield case(
            "options",
            f"generate --name {name!r}",
            "generations",
            (),
            ("generate", "--backend", "fake", "--first", "1", "--name", name, "--out", "{w}/new-run"),
            2,
        )
    for failing in ("--first", "--keys"):  # a server that refuses at once: the run made is removed
        value = "1" if failing == "--first" else "1000,1001"
        args = ("generate", "--backend", "server", "--endpoint", "http://127.0.0.1:9/v1", failing, value,
                "--out", "{w}/new-run")  # fmt: skip
        yield case("options", f"generate {failing} against a refused endpoint leaves no run", "generations",
                   (), args, 2)  # fmt: skip
    for out in ("run", "run/generations", "run/plots", "run/deeper/still"):
        for dry in (True, False):
            args = ("generate", "--first", "1", "--out", "{w}/" + out) + (
                ("--dry-run",) if dry else ("--backend", "fake")
            )
            yield case(
                "options",
                f"generate {'--dry-run ' if dry else ''}--out {out} (in a signed run)",
                "bundle",
                (),
                args,
                2,
            )
    def plan_new(*options: str) -> tuple[str, ...]:
        return ("plan", "new", "newplan", "--model", "{w}", "--reading", "prompt_level_strict_acc",
                "--source", "u", "--prereg", "{w}/prereg", *options)  # fmt: skip

    for option in ("--tok-per-s", "--budget-minutes"):
        for number in BAD_NUMBERS:
            yield case("options", f"plan new {option} {number}", "plan", (),
                       plan_new("--claim", "50", option, number), 2)  # fmt: skip
    for number in ("nan", "inf", "-inf", "-1", "101", "1e309"):
        yield case("options", f"plan new --claim {number}", "plan", (), plan_new("--claim", number), 2)


# ---- report --resign: planted journals -----------------------------------------------------------

JOURNAL = ".run.resign-undo"
OUT_OF_SCOPE = (
    "../victim/precious.txt",
    "/etc/passwd",
    "generations/primary.jsonl",
    "scores/primary.jsonl",
    "analysis.json",
    "manifest.json",
    "run.json",
    "plan.toml",
    "plots/../../victim/precious.txt",
    "plots/a/b.png",
    "plots/",
    "plots/..",
    "plots/.",
    "",
    ".",
    "./RESULTS.md",
    "RESULTS.md/x",
    "bundle.json\x00",
    "a\\b",
    "../run/RESULTS.md",
)


def _index(files: Any) -> bytes:
    return json.dumps({"run_id": "run", "files": files}).encode()


def resign_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """`report RUN --resign` of a run that does not verify (so recovery would restore), beside a
    planted journal: a plots/ link to a folder outside, journals that are links or hold links,
    indexes naming paths out of scope or of the wrong type, copies missing or special."""
    args = ("report", "{w}/run", "--resign", "--ledger", "{w}/ledger.jsonl")
    plots_link = ("run/plots", Symlink("{w}/victim"))
    copies = ((f"{JOURNAL}/files/RESULTS.md", b"planted\n"),)
    indexes = [(f"index names {relative!r}", copies, [relative]) for relative in OUT_OF_SCOPE] + [
        (f"index files = {json.dumps(value)}", (), value)
        for value in ("x", 3, None, {}, [1], [["plots/arms.png"]], [None], {"a": 1})
    ]
    for label, laid, listed in indexes:
        for extra, what in (((plots_link,), "plots/ a link outside"), ((), "plots/ absent")):
            files = (*laid, (f"{JOURNAL}/undo.json", _index(listed)), *extra)
            yield case("resign", f"{label}, {what}", "resign", files, args, 3)
    shapes: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = (
        (
            "plots/ a link outside, index lists a plot",
            (
                plots_link,
                (f"{JOURNAL}/files/plots/arms.png", b"planted"),
                (f"{JOURNAL}/undo.json", _index(["plots/arms.png"])),
            ),
        ),
        ("plots/ a link outside, index lists nothing", (plots_link, (f"{JOURNAL}/undo.json", _index([])))),
        ("the journal a link to a folder outside", ((JOURNAL, Symlink("{w}/victim")),)),
        ("the journal a dangling link", ((JOURNAL, Symlink("{w}/victim/nothing")),)),
        ("the journal a FIFO", ((JOURNAL, FIFO),)),
        (
            "the journal's copies a link outside",
            ((f"{JOURNAL}/files", Symlink("{w}/victim")), (f"{JOURNAL}/undo.json", _index(["RESULTS.md"]))),
        ),
        (
            "the journal's plot copies a link outside",
            (
                (f"{JOURNAL}/files/plots", Symlink("{w}/victim")),
                (f"{JOURNAL}/undo.json", _index(["plots/arms.png"])),
            ),
        ),
        (
            "a copy is a link outside",
            (
                (f"{JOURNAL}/files/RESULTS.md", Symlink("{w}/victim/precious.txt")),
                (f"{JOURNAL}/undo.json", _index(["RESULTS.md"])),
            ),
        ),
        (
            "a copy is a FIFO",
            ((f"{JOURNAL}/files/RESULTS.md", FIFO), (f"{JOURNAL}/undo.json", _index(["RESULTS.md"]))),
        ),
        ("a copy is missing", ((f"{JOURNAL}/undo.json", _index(["RESULTS.md"])),)),
        (
            "a copy is a folder",
            ((f"{JOURNAL}/files/RESULTS.md", directory), (f"{JOURNAL}/undo.json", _index(["RESULTS.md"]))),
        ),
        ("the index a link outside", ((f"{JOURNAL}/undo.json", Symlink("{w}/victim/undo.json")),)),
        ("the index a FIFO", ((f"{JOURNAL}/undo.json", FIFO),)),
        ("the index a link to /dev/zero", ((f"{JOURNAL}/undo.json", Symlink("/dev/zero")),)),
        ("the index not JSON", ((f"{JOURNAL}/undo.json", b"{not json"),)),
        ("the index an array", ((f"{JOURNAL}/undo.json", b"[]"),)),
        ("the index nested deep", ((f"{JOURNAL}/undo.json", b"[" * 100_000),)),
        ("the index a 5000-digit number", ((f"{JOURNAL}/undo.json", b'{"files": ' + b"9" * 5000 + b"}"),)),
        (
            "the run's RESULTS.md a link outside",
            (("run/RESULTS.md", Symlink("{w}/victim/precious.txt")), (f"{JOURNAL}/undo.json", _index([]))),
        ),
        (
            "a temporary beside RESULTS.md a link outside",
            (
                ("run/.RESULTS.md.x.part", Symlink("{w}/victim/precious.txt")),
                (f"{JOURNAL}/undo.json", _index([])),
            ),
        ),
    )
    for label, files in shapes:
        yield case("resign", label, "resign", files, args, 3)


SWEEP_GENERATORS = (
    special_input_cases,
    run_argument_cases,
    special_output_cases,
    harness_cases,
    plan_name_cases,
    option_cases,
    resign_cases,
)

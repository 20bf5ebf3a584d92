"""The bad-input corpus, third part: issue 38's adversarial sweep (item 5), over commands x inputs.

- `options`: `plan cost --lanes` too many or too large for the plan (refused by the one lane-count
  rule `reproduce --lanes` uses); `--endpoint` URLs that are no http(s) URL (a file: URL, a bracket
  left open, a bad port); `generate --out` in the prereg folder or a plan's folder;
- `ledger`: every command's `--ledger` given a FIFO, a device, a loop of links, a name too long;
  `prereg verify` of an empty ledger;
- `special-input`: a loop of symbolic links and names too long (256 characters) as inputs;
- `special-output`: output directories under a regular file;
- `plan-names`: hub repository ids a plan must refuse (`..`, `--`, no org, a path).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import corpus_toml
from corpus_files import FIFO, Symlink

SMOKE = "{w}/prereg/smoke"
LEDGER = "{w}/prereg/ledger.jsonl"
SEAL = ("prereg", "seal", SMOKE + "/plan.toml", "--note", "x", "--ledger", LEDGER)
LONG = "n" * 256  # one more than a file name may hold
#: CPU devices of throughput.toml with a figure for every smoke arm (no host probe needed).
DEVICES = ("xeon-avx512-2c", "epyc-f26-avx512-2c", "epyc-avx2-2c")
BAD_LANES = (
    "0", "-1", "-99999999999999999999999", "36", "1000", "65536", str(2**31), str(2**63), str(2**64),
    "99999999999999999999999", "9" * 100, "9" * 4000,
)  # fmt: skip
BAD_ENDPOINTS = (
    "file:///etc/passwd", "file://localhost/etc/passwd", "file:/etc/passwd", "ftp://127.0.0.1/v1",
    "gopher://127.0.0.1:70/", "ws://127.0.0.1:8000/v1", "unix:///run/vllm.sock", "data:text/plain,x",
    "javascript:alert(1)", "mailto:a@b", "http://[::1", "http://[::1/v1", "http://[", "http://]",
    "http://[::1]x/v1", "http://[zz::1]:8000/v1", "https://[::1:8000", "http://h:99999/v1",
    "http://h:-1/v1", "http://h:port/v1", "http://h:0/v1", "http://h:65536", "http://h:1.5/v1",
    "http://", "https://", "http:///v1", "http://:8000/v1", "http://@/v1", "http:/127.0.0.1/v1",
    "http:127.0.0.1", "127.0.0.1:8000/v1", "localhost:8000", "//127.0.0.1:8000/v1", "/v1", "",
    " ", "http://a b/v1", "http://h/v1 x", "http://h\t/v1", "http://h\n/v1", "http://h\x00/v1",
    "HTTP//h", "htp://h/v1", "http//h:8000", "http:\\\\h\\v1", "\\\\h\\share",
    "http://h:8000:8001/v1", "http://h:65535x/v1", "http://[::1]:99999/v1", "http://[::1]:-5",
    "http://h: 80/v1",
    "https://h:0x50/v1", "http://h:８０/v1", "file:///dev/zero", "file:///proc/self/environ", "ssh://h/v1",
    "sftp://h/v1", "ldap://h/v1", "dict://h:11211/", "tcp://127.0.0.1:8000", "s3://bucket/v1",
)  # fmt: skip
BAD_REPOS = (
    "org/../name", "../org/name", "org/name/..", "org/..", "../..", "org/na..me", "o..rg/name",
    "org--x/name", "org/na--me", "name", "org/", "/name", "/org/name", "org/name/extra", "org//name",
    ".org/name", "org/.name", "-org/name", "org/-name", "org/na me", "org/name\n", "org\\name",
    "~/org/name", "org/" + "n" * 97, "", " ", "org/name@main", "C:/org/name",
)  # fmt: skip
#: (label, what lays at the ledger's path) for every --ledger below.
BAD_LEDGERS: tuple[tuple[str, Any, str], ...] = (
    ("a FIFO", FIFO, "{w}/bad-ledger"),
    ("a link to a FIFO", Symlink("{w}/a-fifo"), "{w}/bad-ledger"),
    ("/dev/zero", None, "/dev/zero"),
    ("/dev/null", None, "/dev/null"),
    ("a loop of links", Symlink("{w}/bad-ledger"), "{w}/bad-ledger"),
    ("a name too long", None, "{w}/" + LONG),
    ("a folder name too long", None, "{w}/" + LONG + "/ledger.jsonl"),
)


def _ledger_commands() -> tuple[tuple[str, tuple[str, ...], int], ...]:
    """(base, command line with `{L}` for a ledger, exit code) for every command taking one."""
    return (
        ("ledger", ("prereg", "verify", "--ledger", "{L}"), 2),
        ("ledger", ("prereg", "seal", SMOKE, "--note", "x", "--ledger", "{L}"), 2),
        ("ledger", ("prereg", "newest", "--model", "smoke", "--ledger", "{L}"), 2),
        ("ledger", ("plan", "cost", SMOKE, "--gpu", DEVICES[0], "--ledger", "{L}"), 2),
        ("bundle", ("verify", "{w}/run", "--ledger", "{L}"), 2),
        ("bundle", ("import", "{w}/run", "--ledger", "{L}", "--into", "{w}/ledger.jsonl"), 2),
        ("bundle", ("import", "{w}/run", "--ledger", "{w}/ledger.jsonl", "--into", "{L}"), 2),
    )


def lane_and_endpoint_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """`plan cost --lanes` past the plan's units (or not a count), and `--endpoint` URLs that are
    not http(s) URLs, on `generate` (ad hoc, server) and `reproduce`."""
    for device in DEVICES:
        for lanes in BAD_LANES:
            args = ("plan", "cost", SMOKE, "--gpu", device, "--lanes", lanes, "--ledger", LEDGER)
            yield case("options", f"plan cost --gpu {device} --lanes {lanes[:30]}", "ledger", (), args, 2)
    for url in BAD_ENDPOINTS:
        generate = (
            "generate",
            "--backend",
            "server",
            "--endpoint",
            url,
            "--first",
            "1",
            "--out",
            "{w}/new-run",
        )
        yield case("options", f"generate --endpoint {url!r}", "generations", (), generate, 2)
        reproduce = (
            "reproduce",
            "--plan",
            SMOKE,
            "--endpoint",
            url,
            "--ledger",
            LEDGER,
            "--results",
            "{w}/res",
        )
        yield case("options", f"reproduce --endpoint {url!r}", "ledger", (), reproduce, 2)


def output_place_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """`generate --out` in the prereg folder or a plan's folder; output directories under a file or
    named too long."""
    for out in ("prereg", "prereg/x", "prereg/dry", "prereg/a/b/c", "prereg/smoke", "prereg/smoke/x",
                "prereg/smoke/controls", "prereg/smoke/controls/deeper"):  # fmt: skip
        for extra, how in ((("--dry-run",), "--dry-run "), (("--backend", "fake"), "")):
            args = ("generate", "--first", "1", "--out", "{w}/" + out, *extra)
            yield case("options", f"generate {how}--out {out} (sealed files)", "ledger", (), args, 2)
    lm = ("import-samples", "lm-eval", "{w}/lm.jsonl", "--out")
    for out in ("a-file/x", "a-file/x/y", "a-file/x/y/z", LONG, "a-file/" + LONG):
        yield case("special-output", f"import-samples --out {out[:40]}", "harness",
                   (("a-file", b"a regular file\n"),), (*lm, "{w}/" + out), 2)  # fmt: skip
        for dry in (("--dry-run",), ("--backend", "fake")):
            args = ("generate", "--first", "1", *dry, "--out", "{w}/" + out)
            yield case("special-output", f"generate {dry[0]} --out {out[:40]}", "generations", (), args, 2)
        yield case("special-output", f"score -o {out[:40]}", "generations", (),
                   ("score", "{w}/g.jsonl", "-o", "{w}/" + out + "/s.jsonl"), 2)  # fmt: skip


def ledger_file_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """Every command's ledger option given a special file or an unstatable path; an empty ledger."""
    for base, args, code in _ledger_commands():
        for label, laid, path in BAD_LEDGERS:
            files = (("bad-ledger", laid),) if laid is not None else ()
            line = tuple(arg.replace("{L}", path) for arg in args)
            flag = "--into" if "--into" in args and args[args.index("--into") + 1] == "{L}" else "--ledger"
            yield case("ledger", f"{' '.join(args[:2])} {flag} {label}", base, files, line, code)
    for name, data in (("empty", b""), ("torn", b'{"seq": 1')):
        laid = ((f"victim/{name}.jsonl", data),)
        args = ("prereg", "verify", "--ledger", f"{{w}}/victim/{name}.jsonl")
        label = f"prereg verify of a {name} ledger with no plan beside it"
        yield case("ledger", label, "ledger", laid, args, 2)


def loop_and_long_name_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """Inputs that are a loop of symbolic links, or whose name is too long for the file system."""
    inputs = (
        ("generations", "g.jsonl", ("score", "{w}/g.jsonl")),
        ("generations", "g.jsonl", ("score", "{w}/g.jsonl", "-o", "{w}/s.jsonl")),
        ("generations", "doc.md", ("check-numbers", "{w}/doc.md")),
        ("manifest", "a.json", ("manifest", "diff", "{w}/a.json", "{w}/b.json")),
        ("plan", "prereg/smoke/plan.toml", SEAL),
        ("harness", "in.jsonl", ("import-samples", "lm-eval", "{w}/in.jsonl", "--out", "{w}/out")),
        ("report", "run/analysis.json", ("report", "{w}/run", "--no-plots")),
    )
    for base, relative, args in inputs:
        laid = ((relative, Symlink("{w}/" + relative)),)
        yield case(
            "special-input", f"{' '.join(args[:2])} with {relative} a loop of links", base, laid, args, 2
        )
    plan_args = (
        ("prereg", "seal", "{P}", "--note", "x", "--ledger", LEDGER),
        ("plan", "cost", "{P}", "--gpu", DEVICES[0], "--ledger", LEDGER),
        ("generate", "--plan", "{P}", "--arm", "hf-fp32-b1", "--dry-run"),
        ("fetch", "model", "--plan", "{P}"),
    )
    for args in plan_args:
        for label, path in (
            ("named too long", "{w}/" + LONG),
            ("in a folder named too long", f"{{w}}/{LONG}/plan.toml"),
            ("plan.toml named too long", f"{SMOKE}/{LONG}"),
        ):
            line = tuple(arg.replace("{P}", path) for arg in args)
            yield case("special-input", f"{' '.join(args[:2])} of a plan {label}", "ledger", (), line, 2)
    for args in (("score", "{w}/" + LONG), ("check-numbers", "{w}/" + LONG),
                 ("manifest", "diff", "{w}/" + LONG, "{w}/b.json")):  # fmt: skip
        base = "manifest" if args[0] == "manifest" else "generations"
        yield case("special-input", f"{' '.join(args[:2])} of a file named too long", base, (), args, 2)


def hub_repo_cases(bases: Any, case: Any, directory: Any) -> Iterator[Any]:
    """The smoke plan as a hub model whose `repo` is no hub id; sealing it must refuse the id."""
    for repo in BAD_REPOS:
        plan = copy.deepcopy(bases.plan)
        plan["model"].update(source="hub", repo=repo, revision="a" * 40)
        data = corpus_toml.dumps(plan).encode()
        yield case(
            "plan-names", f"model.repo {repo[:40]!r}", "plan", (("prereg/smoke/plan.toml", data),), SEAL, 2
        )


ISSUE38_GENERATORS = (
    lane_and_endpoint_cases,
    output_place_cases,
    ledger_file_cases,
    loop_and_long_name_cases,
    hub_repo_cases,
)

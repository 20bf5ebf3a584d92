"""The bad-input corpus, run: every case ends in one `Error:` line and exit 2 or 3, no traceback,
and leaves its workspace exactly as it was (every file's bytes, size and mtime; no file added).

The cases come from `corpus_cases.py` (over a thousand, by loader: run it with `--count`). They run
in-process through click's CliRunner on `capsule.cli`'s group: an exception other than SystemExit
escaping the command is a traceback, hence a failure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_cases import DIRECTORY, Case, all_cases, build_workspaces, counts, read_bases  # noqa: E402
from corpus_files import lay, remove  # noqa: E402

from capsule.cli import cli  # noqa: E402

Snapshot = dict[str, tuple[str, int, int, int, str]]


def snapshot(root: Path) -> Snapshot:
    """Every path under `root`: its kind, size, mtime and ctime (ns), and a small file's sha256."""
    found: Snapshot = {}
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = Path(directory) / name
            info = path.lstat()
            digest = ""
            if path.is_file() and info.st_size <= 1 << 16:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            kind = "dir" if path.is_dir() else "file"
            found[str(path.relative_to(root))] = (
                kind,
                info.st_size,
                info.st_mtime_ns,
                info.st_ctime_ns,
                digest,
            )
    return found


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_workspaces(tmp_path_factory.mktemp("corpus"))


CASES_ROOT: dict[str, Path] = {}


def _cases() -> list[Case]:
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="corpus-bases-"))
    try:
        return all_cases(read_bases(build_workspaces(root)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


CASES = _cases()


def _params() -> Iterator[object]:
    for case in CASES:
        marks = [pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else []
        yield pytest.param(case, id=case.id, marks=marks)


def _lay(root: Path, case: Case) -> list[tuple[Path, bytes | None, bool]]:
    """Put the case's files in place (missing parents made; a regular file there is replaced);
    return what to restore: (path, old bytes, existed)."""
    undo = []
    for relative, data in case.files:
        path = root / relative
        existed = os.path.lexists(path)
        replaceable = not existed or (path.is_file() and not path.is_symlink())
        assert replaceable, f"{path}: a case replaces regular files only"
        undo.append((path, path.read_bytes() if existed else None, existed))
        path.parent.mkdir(parents=True, exist_ok=True)
        if existed and not isinstance(data, bytes):
            path.unlink()
        if data is DIRECTORY:
            path.mkdir()
        elif isinstance(data, bytes):
            path.write_bytes(data)
        else:
            try:
                lay(path, data, root)
            except PermissionError:  # a device node needs root
                _restore(undo)
                pytest.skip("making a device node needs root")
    return undo


def _restore(undo: list[tuple[Path, bytes | None, bool]]) -> None:
    for path, old, existed in reversed(undo):
        if not existed:
            remove(path)
        elif old is not None:
            if path.is_symlink() or not path.is_file():
                remove(path)
            path.write_bytes(old)


def _remove_new(root: Path, base: set[str]) -> None:
    for relative in sorted(set(snapshot(root)) - base, reverse=True):
        path = root / relative
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def test_the_corpus_is_large_and_covers_every_loader() -> None:
    by_loader = counts(CASES)
    print(
        "bad-input corpus by loader:",
        ", ".join(f"{k} {v}" for k, v in by_loader.items()),
        f"total {len(CASES)}",
    )
    assert len(CASES) >= 3000
    assert set(by_loader) == {
        "generations", "output", "plan", "ledger", "bundle", "manifest", "analysis",
        "special-input", "special-output", "harness", "plan-names", "options", "resign",
    }
    small = ("output", "special-output", "plan-names", "options", "resign")
    assert all(number >= 100 for loader, number in by_loader.items() if loader not in small), by_loader


def test_the_bases_are_valid(workspaces: dict[str, Path]) -> None:
    """The unbroken inputs pass, so each case fails for the one thing it breaks."""
    runner = CliRunner()
    checks = {
        "ledger": ["prereg", "verify", "--ledger", f"{workspaces['ledger']}/prereg/ledger.jsonl"],
        "bundle": [
            "verify",
            f"{workspaces['bundle']}/run",
            "--ledger",
            f"{workspaces['bundle']}/ledger.jsonl",
        ],
        "manifest": [
            "manifest",
            "diff",
            f"{workspaces['manifest']}/a.json",
            f"{workspaces['manifest']}/b.json",
        ],
    }
    for name, args in checks.items():
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, (name, result.output)
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.report.document import load_run
    from ifeval_scorer import load_prompts
    from ifeval_scorer.inputs import read_generations

    load_run(workspaces["report"] / "run")
    assert (
        len(read_generations(workspaces["generations"] / "g.jsonl", load_prompts(fetch_prompts(None).path)))
        == 3
    )
    plan = workspaces["plan"] / "prereg" / "smoke" / "plan.toml"
    copy = workspaces["plan"].parent / "plan-sealable"
    shutil.copytree(workspaces["plan"], copy, ignore=shutil.ignore_patterns("a-fifo"))
    result = runner.invoke(
        cli,
        [
            "prereg",
            "seal",
            str(copy / plan.relative_to(workspaces["plan"])),
            "--note",
            "base",
            "--ledger",
            str(copy / "prereg" / "ledger.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    harness = workspaces["harness"]
    for name, command in (("lm.jsonl", "lm-eval"), ("le.jsonl", "lighteval"), ("legacy.jsonl", "lighteval")):
        out = harness.parent / f"imported-{name}"
        result = runner.invoke(cli, ["import-samples", command, str(harness / name), "--out", str(out)])
        assert result.exit_code == 0, (name, result.output, result.stderr)


@pytest.mark.parametrize("case", list(_params()))
def test_bad_input_is_one_clean_error(case: Case, workspaces: dict[str, Path]) -> None:
    root = workspaces[case.base]
    base = set(snapshot(root))
    undo = _lay(root, case)
    try:
        before = snapshot(root)
        args = [arg.replace("{w}", str(root)) for arg in case.args]
        result = CliRunner().invoke(cli, args, catch_exceptions=True)
        after = snapshot(root)
    finally:
        _restore(undo)
        _remove_new(root, base)  # what a wrongly accepted case wrote must not leak into the next one
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback: {result.exception!r}") from result.exception
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert result.exit_code == case.exit_code, result.output
    assert "Traceback" not in result.output
    assert len(errors) == 1, result.stderr
    assert before == after, "the workspace changed"

"""Issue 38, item 4: one trust rule for every checker. Each forgery below passed `compare`,
`compare --out`, `check-numbers`, `report --check` or `manifest diff` at 8f9ed09 while `verify`
(or the rule "dry runs and unsigned runs are never evidence") refused it; each is refused now.

The runs: the smoke plan's runs made with the fake backend by the test helpers (`run_pair`), turned
into stand-ins for real runs where a real run is needed (`as_if_run_for_real`), and left as dry runs
(random tokens, the fake backend where the plan declares another) where the forgery is a dry run.
Every run is signed by the collaborator's key the test ledger trusts, so only the rule under test
can refuse it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from run_pair import as_if_run_for_real, copy_run, dry_run, new_root, record_start, sign

from capsule.cli import cli
from capsule.run_dir import BUNDLE, ENVELOPE, PUBLIC_KEY, RunDir

DRY = "a dry run (random tokens) is never evidence"


def _unrecorded(root: Path, ledger: Path, *, real: bool) -> Path:
    """A run made in `root` (another machine), signed there, never bundled in `ledger` (only its start
    recorded, so the trusted key may sign it); a stand-in for a real run when `real`."""
    made = dry_run(root)
    if real:
        as_if_run_for_real(made)
    record_start(made, ledger)
    sign(made, None)
    return made


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A root whose ledger records one real run; two signed dry runs and one real run made elsewhere."""
    root = new_root(tmp_path_factory.mktemp("repo"))
    ledger = root / "prereg" / "ledger.jsonl"
    real = as_if_run_for_real(dry_run(root))
    sign(real, ledger)
    runs = {"root": root, "real": real}
    for name, is_real in (("dry_a", False), ("dry_b", False), ("real_b", True)):
        runs[name] = _unrecorded(new_root(tmp_path_factory.mktemp(name)), ledger, real=is_real)
    return runs


@pytest.fixture
def repo(made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A private copy: tmp_path/prereg/ledger.jsonl and every run under tmp_path/runs/<name>/; cwd is
    tmp_path (a repository root)."""
    (tmp_path / "prereg").mkdir()
    shutil.copy(made["root"] / "prereg" / "ledger.jsonl", tmp_path / "prereg" / "ledger.jsonl")
    names = ("real", "dry_a", "dry_b", "real_b")
    runs = {name: copy_run(made[name], tmp_path / "runs" / name) for name in names}
    monkeypatch.chdir(tmp_path)
    return runs


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def _one_error(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output + result.stderr
    return lines[0]


def _readme(path: Path, run: Path, block: str = "headline") -> Path:
    """A README quoting `run` in one region, filled in from the run by `capsule report --update`."""
    path.write_text(f"Intro.\n<!-- capsule:numbers run={run} block={block} -->\n<!-- /capsule:numbers -->\n")
    updated = invoke("report", run, "--update", path)
    assert updated.exit_code == 0, updated.output + updated.stderr
    return path


def test_two_signed_dry_runs_are_not_compared(repo: dict[str, Path], tmp_path: Path) -> None:
    """Two signed dry runs never bundled in the ledger compared (exit 0 at 8f9ed09): refused (exit 2),
    and `--out` writes nothing."""
    result = invoke("compare", repo["dry_a"], repo["dry_b"])
    assert result.exit_code == 2 and DRY in _one_error(result)
    written = invoke("compare", repo["dry_a"], repo["dry_b"], "--out", tmp_path / "cmp.md")
    assert written.exit_code == 2 and DRY in _one_error(written)
    assert not (tmp_path / "cmp.md").exists()


def test_a_dry_run_beside_a_real_run_is_not_compared(repo: dict[str, Path]) -> None:
    """A dry run as either side of a comparison with a real run."""
    for a, b in (("real", "dry_a"), ("dry_a", "real")):
        result = invoke("compare", repo[a], repo[b])
        assert result.exit_code == 2 and DRY in _one_error(result)
    assert invoke("compare", repo["real"], repo["real_b"]).exit_code == 0  # the real pair still compares


def test_a_comparison_region_of_a_dry_run_fails_check_numbers(repo: dict[str, Path], tmp_path: Path) -> None:
    """A comparison region of two real runs passes; the same region naming a dry run fails."""
    readme = tmp_path / "README.md"
    for against, code in ((repo["real_b"], 0), (repo["dry_a"], 2)):
        readme.write_text(
            f"<!-- capsule:numbers run={repo['real']} against={against} block=comparison_summary -->\n"
            "<!-- /capsule:numbers -->\n"
        )
        if code == 0:
            assert invoke("compare", repo["real"], against, "--update", readme).exit_code == 0
        result = invoke("check-numbers", readme)
        assert result.exit_code == code, result.output + result.stderr
    assert DRY in _one_error(result)


def test_a_region_quoting_an_unsigned_run_fails(repo: dict[str, Path], tmp_path: Path) -> None:
    """A README region quoting a run without its signature was "numbers only, not evidence", exit 0."""
    readme = _readme(tmp_path / "README.md", repo["real"])
    checked = invoke("check-numbers", readme)
    assert checked.exit_code == 0 and "1 signed run(s) verified" in checked.stdout, checked.output
    RunDir(repo["real"]).envelope.unlink()
    result = invoke("check-numbers", readme)
    assert result.exit_code == 3 and "which is not signed" in _one_error(result)
    assert f"{readme}:2:" in _one_error(result)  # the region named by its file and line


def test_edited_analysis_report_and_readme_without_a_re_sign_fail(
    repo: dict[str, Path], tmp_path: Path
) -> None:
    """analysis.json, RESULTS.md and the README edited together (they agree with each other), the run
    not signed again: refused with the signature kept (a digest) and with it removed (unsigned)."""
    run = repo["real"]
    readme = _readme(tmp_path / "README.md", run)
    analysis = RunDir(run).analysis
    text = analysis.read_text()
    value = json.loads(text)["headline"]["readings"][0]["value_pct"]
    pattern = rf'"value_pct": ?{re.escape(json.dumps(value))}'
    edited = re.sub(pattern, f'"value_pct": {value + 1.0:.2f}', text, count=1)
    assert edited != text
    analysis.write_text(edited)
    assert invoke("report", run).exit_code in (0, 2)  # a signed run's report is not rewritten
    (run / "RESULTS.md").unlink()
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):
        shutil.move(run / name, tmp_path / name)
    assert invoke("report", run, "--no-plots").exit_code == 0  # RESULTS.md now agrees with the edit
    assert invoke("report", run, "--update", readme).exit_code == 0  # and so does the README
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):  # the old signature back: the digests differ
        shutil.move(tmp_path / name, run / name)
    for args in (("check-numbers", readme), ("report", run, "--check")):
        result = invoke(*args)
        assert result.exit_code == 3, (args, result.output, result.stderr)
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):  # no signature at all: not evidence
        (run / name).unlink()
    for args in (("check-numbers", readme), ("report", run, "--check")):
        result = invoke(*args)
        assert result.exit_code == 3 and "not signed" in _one_error(result), (args, result.stderr)


def test_report_check_refuses_a_dry_run(repo: dict[str, Path]) -> None:
    result = invoke("report", repo["dry_a"], "--check")
    assert result.exit_code == 2 and DRY in _one_error(result)


def test_manifest_diff_verifies_run_directories(repo: dict[str, Path], tmp_path: Path) -> None:
    """`manifest diff` of run directories read their manifests unchecked: now a run directory's run is
    verified first (an edited manifest, an unsigned run: exit 3; a dry run: exit 2); plain manifest
    files are still diffed, labelled unverified."""
    real, other = repo["real"], repo["real_b"]
    good = invoke("manifest", "diff", real, other)
    assert good.exit_code == 0 and "A: run " in good.stderr and "verified, trusted" in good.stderr
    files = invoke("manifest", "diff", RunDir(real).manifest, RunDir(other).manifest)
    assert files.exit_code == 0 and "not verified" in files.stderr
    manifest = RunDir(other).manifest
    data = json.loads(manifest.read_text())
    data["host"]["cpu"]["model"] = "Forged CPU"
    manifest.write_text(json.dumps(data))
    edited = invoke("manifest", "diff", real, other)
    assert edited.exit_code == 3 and "Forged CPU" not in edited.stdout, edited.output
    dry = invoke("manifest", "diff", real, repo["dry_a"])
    assert dry.exit_code == 2 and DRY in _one_error(dry)
    RunDir(real).envelope.unlink()
    unsigned = invoke("manifest", "diff", real, real)
    assert unsigned.exit_code == 3 and "not signed" in _one_error(unsigned)


@pytest.mark.parametrize("command", ["compare", "check-numbers", "manifest diff"])
def test_a_missing_ledger_is_an_error_not_no_ledger(
    repo: dict[str, Path], tmp_path: Path, command: str
) -> None:
    """`--ledger` naming no file, or a working directory without prereg/: exit 2 (it was "no ledger",
    signature and digests only, so an untrusted run passed)."""
    out = tmp_path / "CMP.md"
    assert invoke("compare", repo["real"], repo["real_b"], "--out", out).exit_code == 0
    args = {"compare": ("compare", repo["real"], repo["real_b"]), "check-numbers": ("check-numbers", out),
            "manifest diff": ("manifest", "diff", repo["real"], repo["real_b"])}[command]
    named = invoke(*args, "--ledger", tmp_path / "nowhere.jsonl")
    assert named.exit_code == 2 and "nowhere.jsonl not found" in _one_error(named)
    shutil.rmtree(tmp_path / "prereg")
    default = invoke(*args)
    assert default.exit_code == 2 and "not found" in _one_error(default)


def test_a_copy_under_another_name_is_not_a_second_run_in_a_region(
    repo: dict[str, Path], tmp_path: Path
) -> None:
    """A comparison region whose second run is a byte copy of its first under another name."""
    copy = tmp_path / "copy-of-real"
    shutil.copytree(repo["real"], copy)
    readme = tmp_path / "README.md"
    readme.write_text(
        f"<!-- capsule:numbers run={repo['real']} against={copy} block=comparison_summary -->\n"
        "<!-- /capsule:numbers -->\n"
    )
    result = invoke("check-numbers", readme)
    assert result.exit_code == 2 and "are the same run (run id " in _one_error(result)

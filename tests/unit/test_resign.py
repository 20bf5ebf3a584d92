"""`capsule report RUN --resign`: a signed run's documents re-rendered and signed again, only when
the run verifies as it stands, with the old ledger entry kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from capsule.cli import cli
from capsule.evidence.signing import generate_keypair
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import BundleEntry
from capsule.report import document as report_module


@pytest.fixture()
def signed_run(signed_smoke_run: Path) -> Path:
    """A dry run of the smoke plan in a repository copy, signed with a bundle entry in its ledger
    (a copy of the one the session builds: tests/conftest.py::signed_smoke_root)."""
    return signed_smoke_run


def _bundle_entries(run: Path) -> list[BundleEntry]:
    """This run's bundle entries (the copied real ledger may hold other runs')."""
    return Ledger.load(Path("prereg/ledger.jsonl")).bundle_entries(run.name)


def _resign(run: Path) -> object:
    return CliRunner().invoke(cli, ["report", str(run), "--resign"])


def test_unchanged_report_is_not_resigned(signed_run: Path) -> None:
    before = (signed_run / "bundle.dsse.json").read_bytes()
    result = _resign(signed_run)
    assert result.exit_code == 0 and "nothing re-signed" in result.output
    assert (signed_run / "bundle.dsse.json").read_bytes() == before and len(_bundle_entries(signed_run)) == 1


def test_new_rendering_is_resigned_and_verifies(signed_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real, real_plots = report_module.render_report, report_module.render_plots
    better = "\nA better sentence.\n"
    renders: list[str] = []

    def render(*args, **kwargs):  # type: ignore[no-untyped-def]
        renders.append("report")
        return real(*args, **kwargs) + better

    def render_plots(*args, **kwargs):  # type: ignore[no-untyped-def]
        renders.append("plots")
        return real_plots(*args, **kwargs)

    monkeypatch.setattr(report_module, "render_report", render)
    monkeypatch.setattr(report_module, "render_plots", render_plots)  # as the report looks it up
    analysis = (signed_run / "analysis.json").read_bytes()
    result = _resign(signed_run)
    assert result.exit_code == 0, result.output + result.stderr
    assert sorted(renders) == ["plots", "report"]  # rendered once: compared with the run, then written
    assert "re-rendered RESULTS.md" in result.output
    assert (signed_run / "RESULTS.md").read_text().endswith("A better sentence.\n")
    assert (signed_run / "analysis.json").read_bytes() == analysis
    first, second = _bundle_entries(signed_run)
    assert first.run_id == second.run_id and first.seq < second.seq
    verified = CliRunner().invoke(cli, ["verify", str(signed_run)])
    assert verified.exit_code == 0 and f"bundle entry {second.seq}" in verified.output


def test_tampered_run_is_never_resigned(signed_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = report_module.render_report
    monkeypatch.setattr(report_module, "render_report", lambda *a, **k: real(*a, **k) + "\nchanged\n")
    analysis = signed_run / "analysis.json"
    analysis.write_text(analysis.read_text().replace("0", "1", 1))
    report_before = (signed_run / "RESULTS.md").read_bytes()
    result = _resign(signed_run)
    assert result.exit_code == 3 and "analysis.json" in (result.output + result.stderr)
    assert (signed_run / "RESULTS.md").read_bytes() == report_before and len(_bundle_entries(signed_run)) == 1


def test_unsigned_run_is_refused(signed_run: Path) -> None:
    for name in ("bundle.json", "bundle.dsse.json", "bundle.pub.pem"):
        (signed_run / name).unlink()
    result = _resign(signed_run)
    assert result.exit_code == 2 and "not signed" in (result.output + result.stderr)


def test_resign_with_an_untrusted_key_is_refused(
    signed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--resign` signs only with a key the plan trusts: another key is refused before anything is
    written, naming the key."""
    real = report_module.render_report
    monkeypatch.setattr(report_module, "render_report", lambda *a, **k: real(*a, **k) + "\nchanged\n")
    other = generate_keypair(tmp_path / "other")
    before = {p: p.read_bytes() for p in signed_run.rglob("*") if p.is_file()}
    result = CliRunner().invoke(
        cli, ["report", str(signed_run), "--resign", "--key", str(other.private_path)]
    )
    assert result.exit_code == 3, result.output
    assert other.fingerprint in result.stderr
    assert "not trusted for plan prereg/smoke-v2/plan.toml" in result.stderr
    assert {p: p.read_bytes() for p in signed_run.rglob("*") if p.is_file()} == before
    assert len(_bundle_entries(signed_run)) == 1


# ---- issue 26, finding 2: a planted journal never makes a re-sign write or delete outside the run --


def _plant_journal(run: Path, files: dict[str, bytes], listed: list[str] | None = None) -> Path:
    """An undo journal beside `run`, as a kill mid-re-sign would leave it (copies, then the index)."""
    import json

    from capsule.run_dir import RunDir

    journal = RunDir(run).resign_journal
    (journal / "files").mkdir(parents=True, exist_ok=True)
    for relative, data in files.items():
        (journal / "files" / relative).parent.mkdir(parents=True, exist_ok=True)
        (journal / "files" / relative).write_bytes(data)
    index = {"run_id": run.name, "files": sorted(files) if listed is None else listed}
    (journal / "undo.json").write_text(json.dumps(index), encoding="utf-8")
    return journal


def _tree(root: Path) -> dict[str, bytes | str]:
    def content(path: Path) -> bytes | str:
        if path.is_symlink():
            return f"-> {os.readlink(path)}"
        return path.read_bytes() if path.is_file() else "dir"

    return {str(path.relative_to(root)): content(path) for path in sorted(root.rglob("*"))}


def _refused_without_a_trace(run: Path, victim: Path) -> None:
    before = _tree(victim)
    refused = CliRunner().invoke(cli, ["verify", str(run)])
    assert refused.exit_code == 3, refused.output
    result = _resign(run)
    assert result.exit_code == 3, result.output + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert _tree(victim) == before, "a re-sign wrote or deleted outside the run"


def test_a_planted_journal_and_a_plots_symlink_touch_nothing_outside(
    signed_run: Path, tmp_path: Path
) -> None:
    """The issue's attack: plots/ a symlink to another folder, and a journal that lists one plot. The
    old restore copied the plot into that folder and unlinked every other file there."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me", encoding="utf-8")
    (victim / "other.png").write_bytes(b"png")
    shutil.rmtree(signed_run / "plots", ignore_errors=True)
    (signed_run / "plots").symlink_to(victim, target_is_directory=True)
    _plant_journal(signed_run, {"plots/arms.png": b"planted", "RESULTS.md": b"planted"})
    _refused_without_a_trace(signed_run, victim)
    result = _resign(signed_run)
    assert "symbolic link" in result.stderr and str(signed_run / "plots") in result.stderr


def test_every_other_planted_path_is_refused(signed_run: Path, tmp_path: Path) -> None:
    """A journal that is itself a symlink, whose copies sit behind a symlink, or whose index names a
    path outside the run or one a re-sign never changes: refused, nothing outside or inside changed.
    The run does not verify as it stands (RESULTS.md edited), so recovery would restore from the
    journal rather than discard it."""
    from capsule.run_dir import RunDir

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "undo.json").write_text('{"files": []}', encoding="utf-8")
    (victim / "precious.txt").write_text("keep me", encoding="utf-8")
    journal = RunDir(signed_run).resign_journal
    results = RunDir(signed_run).results
    signed = results.read_bytes()
    results.write_bytes(signed + b"\nedited after signing\n")  # so recovery must restore, not discard
    inside = _tree(signed_run)

    def journal_is_a_link() -> None:
        journal.symlink_to(victim, target_is_directory=True)

    def copies_behind_a_link() -> None:
        _plant_journal(signed_run, {})
        (journal / "files").rmdir()
        (journal / "files").symlink_to(victim, target_is_directory=True)
        (journal / "undo.json").write_text('{"files": ["precious.txt"]}', encoding="utf-8")

    def index_names_outside() -> None:
        _plant_journal(signed_run, {"RESULTS.md": b"x"}, listed=["../victim/precious.txt"])

    def index_names_a_generation() -> None:
        _plant_journal(signed_run, {"generations/primary.jsonl": b"forged\n"})

    for plant in (journal_is_a_link, copies_behind_a_link, index_names_outside, index_names_a_generation):
        plant()
        _refused_without_a_trace(signed_run, victim)
        assert _tree(signed_run) == inside, plant.__name__
        if journal.is_symlink():
            journal.unlink()
        else:
            if (journal / "files").is_symlink():
                (journal / "files").unlink()
            shutil.rmtree(journal)
    results.write_bytes(signed)
    assert CliRunner().invoke(cli, ["verify", str(signed_run)]).exit_code == 0

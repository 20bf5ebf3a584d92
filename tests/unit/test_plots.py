"""Plots: deterministic PNG bytes, one file per view there is data for, referenced from RESULTS.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report_support import make_run

from capsule.analysis.codec import analysis_from_json
from capsule.analysis.schema import Analysis
from capsule.report.document import PLOT_CAPTIONS, write_report
from capsule.report.plots import PLOTS, render_plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _analysis(run: Path) -> Analysis:
    return analysis_from_json(json.loads((run / "analysis.json").read_text()))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("plots"))


@pytest.fixture(scope="module")
def rendered(run: Path) -> dict[str, bytes]:
    return render_plots(_analysis(run), run)


def test_every_plot_is_a_png_without_a_version_stamp(rendered: dict[str, bytes]) -> None:
    assert set(rendered) == set(PLOTS) == set(PLOT_CAPTIONS)
    for name, data in rendered.items():
        assert data.startswith(PNG_MAGIC), name
        assert b"matplotlib" not in data.lower() and b"Software" not in data, name


def test_rendering_twice_gives_identical_bytes(run: Path, rendered: dict[str, bytes]) -> None:
    again = render_plots(_analysis(run), run)
    assert again == rendered


def test_plots_without_data_are_skipped_and_stale_files_removed(tmp_path: Path) -> None:
    """The report writes a plot only where there is data for it, and removes an old file of a plot it
    no longer draws (no stale image beside a new RESULTS.md)."""
    run = make_run(tmp_path, comparisons=False)
    stale = run / "plots" / "discordance.png"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"old")
    for arm in _analysis(run).arms:  # no generations: no length plot
        (run / "generations" / f"{arm}.jsonl").unlink()
    text = write_report(run).read_text(encoding="utf-8")
    assert not stale.exists() and "](plots/discordance.png)" not in text
    assert not (run / "plots" / "lengths.png").exists()
    assert (run / "plots" / "arms.png").is_file()


def test_results_md_references_the_plots_it_wrote(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    text = write_report(run).read_text(encoding="utf-8")
    for name in PLOT_CAPTIONS:
        assert (run / "plots" / name).is_file()
        assert f"](plots/{name})" in text
    # images sit outside the numbers regions
    for region in text.split("<!-- capsule:numbers")[1:]:
        assert "](plots/" not in region.split("<!-- /capsule:numbers -->")[0]

"""Installing a package off the numerics path between two halves of a run does not block its resume;
one on the numerics path still does (the resume guard: `pipeline.opening.start_manifest`).

The run is a dry run (the fake backend) of 8 prompts in batches of 2, cut back to its first two
batches as a run killed there leaves it. A package is "installed" by a dist-info directory on
sys.path, which is all `importlib.metadata` (and so the manifest) reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from capsule.cli import cli
from capsule.machine.software import installed_distributions, on_numerics_path

ARGS = ["generate", "--dry-run", "--first", "8", "--batch-size", "2", "--no-progress"]


def _generate(out: Path) -> Result:
    return CliRunner().invoke(cli, [*ARGS, "--out", str(out)])


def _first_half(out: Path) -> Path:
    """Run the arm, then keep only its first two batches' rows, as a run killed after them."""
    result = _generate(out)
    assert result.exit_code == 0, result.output
    rows_path = out / "dry-run" / "generations" / "adhoc.jsonl"
    rows = rows_path.read_text().splitlines()
    batches = sorted({json.loads(row)["batch_index"] for row in rows})
    kept = [row for row in rows if json.loads(row)["batch_index"] in batches[:2]]
    rows_path.write_text("".join(line + "\n" for line in kept))
    return rows_path


def _install(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.chdir(tmp_path)
    return directory


def test_a_package_off_the_numerics_path_does_not_block_a_resume(tmp_path: Path, site: Path) -> None:
    out = tmp_path / "run"
    rows_path = _first_half(out)
    assert "pyarrow" not in installed_distributions() and not on_numerics_path("pyarrow")
    _install(site, "pyarrow", "26.0.1")  # what the README's hint installs for parquet imports
    assert installed_distributions()["pyarrow"] == "26.0.1"
    result = _generate(out)
    assert result.exit_code == 0, result.output
    assert "resuming on the same machine fingerprint" in result.output
    assert len(rows_path.read_text().splitlines()) == 8


def test_a_package_on_the_numerics_path_still_blocks_it(tmp_path: Path, site: Path) -> None:
    out = tmp_path / "run"
    _first_half(out)
    name = "nvidia-cublas-cu99"  # matches `nvidia-*`: a kernel library
    assert on_numerics_path(name)
    _install(site, name, "1.0")
    result = _generate(out)
    assert result.exit_code == 2, result.output
    assert "numerics differ" in result.output and name in result.output

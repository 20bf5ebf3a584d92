"""RESULTS.md for a run directory, written from `analysis.json` and `manifest.json` only.

The report is a sequence of named blocks (`capsule.report.blocks.BLOCKS`: headline, arms,
comparisons, controls, machine; summary for READMEs). Each block is a pure function of the run's
files, and every number in it is formatted by `capsule.report.formatting`, so `capsule check-numbers`
can re-render a block and compare it number by number with any Markdown that quotes it (README
regions, RESULTS.md itself). Plots come from `capsule.report.plots`.
In RESULTS.md each block sits between `<!-- capsule:numbers run=. block=NAME -->` markers; the
plot images and the signature note sit outside them. FAILED CONTROLS come first when any failed.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsule.analysis.codec import read_analysis
from capsule.analysis.schema import Analysis
from capsule.atomic import write_bytes_atomic
from capsule.errors import BadInputError
from capsule.jsonio import read_json_object
from capsule.machine.manifest_record import ManifestRecord, read_manifest
from capsule.report.batch_finding import contrasts_dtypes
from capsule.report.blocks import BLOCKS, render_block
from capsule.report.formatting import fmt_interval, fmt_p, fmt_pct
from capsule.report.headline import headline_line
from capsule.report.plots import render_plots
from capsule.report.report_input import ReportInput
from capsule.run_dir import RESULTS, RunDir

__all__ = [
    "BLOCKS",
    "ReportInput",
    "changed_outputs",
    "check_report",
    "fmt_interval",
    "fmt_p",
    "fmt_pct",
    "headline_line",
    "load_run",
    "render_block",
    "render_outputs",
    "render_report",
    "write_outputs",
    "write_report",
]


def marked(name: str, data: ReportInput, run: str = ".") -> list[str]:
    """Block `name` between its `capsule:numbers` markers (the form RESULTS.md and README use)."""
    return [
        f"<!-- capsule:numbers run={run} block={name} -->",
        render_block(name, data),
        "<!-- /capsule:numbers -->",
    ]


#: Plot file name (under plots/) -> the report section it follows and its caption.
PLOT_CAPTIONS: dict[str, tuple[str, str]] = {
    "arms.png": ("headline", "Each arm's score on the claim's metric with its interval, against the claim"),
    "lengths.png": ("arms", "Response lengths per arm, with the token cap marked"),
    "discordance.png": ("comparisons", "Discordant prompts of each paired comparison"),
    "divergence.png": ("controls", "Where outputs first diverge, per batch-size and backend contrast"),
    "scorer.png": ("controls", "The scorer's spread over unseeded runs and its letter band"),
}


def _images(section: str, plots: Sequence[str]) -> list[str]:
    lines = []
    for name, (where, caption) in PLOT_CAPTIONS.items():
        if where == section and RunDir.plot_relative(name) in plots:
            lines += [f"![{caption}]({RunDir.plot_relative(name)})", ""]
    return lines


def _signature(fingerprint: str | None) -> list[str]:
    if fingerprint:
        return [
            f"Signed with Ed25519 key `{fingerprint}`: `bundle.json` lists every file of this run with its "
            "sha256 and `bundle.dsse.json` signs it. Check with `capsule verify RUN_DIR`."
        ]
    return [
        "This file is written before the run is signed: `bundle.json` lists every file of the run (this "
        "one and the plots included) with its sha256 and names the signing key (`key.fingerprint`); "
        "`bundle.dsse.json` holds the signature. Check with `capsule verify RUN_DIR`."
    ]


def render_report(
    analysis: Analysis,
    manifest: ManifestRecord | None,
    *,
    plots: Sequence[str] = (),
    fingerprint: str | None = None,
    probe_note: str | None = None,
) -> str:
    """The RESULTS.md text for one run. `plots`: the run's plot files (`plots/NAME.png`) to show;
    `fingerprint`: the signing key's fingerprint when known before signing; `probe_note`: a probe's."""
    data = ReportInput(analysis, manifest, tuple(plots), probe_note)
    plan = analysis.plan.name
    lines = [f"# Results: {plan}" if plan else "# Results", ""]
    sections = [
        ("headline", None),
        *([("batch_finding", None)] if contrasts_dtypes(analysis) else []),
        ("arms", "Arms"),
        ("comparisons", "Paired comparisons"),
        ("controls", "Controls"),
        ("machine", "Machine"),
    ]
    for name, title in sections:
        if title:
            lines += [f"## {title}", ""]
        lines += marked(name, data) + [""] + _images(name, plots)
    lines += ["## Signature", ""] + _signature(fingerprint)
    return "\n".join(lines).rstrip() + "\n"


def load_run(run_dir: Path) -> ReportInput:
    """Read a run's analysis.json (into `capsule.analysis.schema.Analysis`) and manifest.json
    (optional) and list its existing plots."""
    run = RunDir(run_dir)
    analysis = read_analysis(run.analysis)
    manifest = read_manifest(run.manifest) if run.manifest.exists() else None  # validated: BadInputError
    plots = tuple(RunDir.plot_relative(name) for name in PLOT_CAPTIONS if run.plot(name).is_file())
    probe = str(read_json_object(run.probe, "probe.json").get("note", "")) if run.probe.is_file() else None
    return ReportInput(analysis, manifest, plots, probe)


def render_outputs(run_dir: Path, *, fingerprint: str | None = None, plots: bool = True) -> dict[str, bytes]:
    """Everything the report writes, in memory: `{relative path: bytes}` for RESULTS.md and, unless
    `plots` is False, `plots/*.png` (without plots, RESULTS.md shows the plots already on disk)."""
    data = load_run(run_dir)
    files: dict[str, bytes] = {}
    shown = data.plots
    if plots:
        rendered = render_plots(data.analysis, run_dir)
        files = {RunDir.plot_relative(name): png for name, png in rendered.items()}
        shown = tuple(files)
    text = render_report(
        data.analysis, data.manifest, plots=shown, fingerprint=fingerprint, probe_note=data.probe_note
    )
    files[RESULTS] = text.encode("utf-8")
    return files


def changed_outputs(run_dir: Path, files: Mapping[str, bytes]) -> list[str]:
    """The paths of `files` whose bytes differ from what `run_dir` holds now (or that it lacks)."""
    changed = []
    for relative, data in files.items():
        path = run_dir / relative
        if not path.is_file() or path.read_bytes() != data:
            changed.append(relative)
    return changed


def write_report(run_dir: Path, *, fingerprint: str | None = None, plots: bool = True) -> Path:
    """Write `run_dir/plots/*.png` (unless `plots` is False) and `run_dir/RESULTS.md` from the run's
    analysis.json and manifest.json; remove plots there is no longer data for. Call it before
    signing: both are bundled. `fingerprint`: the signing key's, when known, is stated in the file."""
    return write_outputs(run_dir, render_outputs(run_dir, fingerprint=fingerprint, plots=plots), plots=plots)


def write_outputs(run_dir: Path, files: Mapping[str, bytes], *, plots: bool = True) -> Path:
    """Write what `render_outputs` rendered into `run_dir` and return RESULTS.md's path; `plots`:
    whether the rendering included the plots, and so whether plots without data are removed.
    Taking the rendered files lets a caller that first compared them (`--resign`) render once."""
    run = RunDir(run_dir)
    for relative, data in files.items():
        write_bytes_atomic(run.path / relative, data)
    if plots:
        for name in PLOT_CAPTIONS:
            if RunDir.plot_relative(name) not in files and run.plot(name).exists():
                run.plot(name).unlink()
    return run.results


def check_report(run_dir: Path, *, fingerprint: str | None = None) -> list[str]:
    """Re-render RESULTS.md in full from the run and compare it with the file, byte for byte.

    Returns a unified diff (empty when identical). The plots on disk are listed as they are; the
    signature paragraph may name `fingerprint` (the signing key's, from the verified bundle index)
    or no key (RESULTS.md is written before signing).
    Plot bytes are not compared here: they also depend on the matplotlib and FreeType versions;
    the bundle's signature covers them.
    """
    path = RunDir(run_dir).results
    try:
        current = path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadInputError(
            f"{path}: cannot read ({error}); write it with `capsule report {run_dir}`"
        ) from error
    data = load_run(run_dir)
    diff: list[str] = []
    for named in dict.fromkeys((None, fingerprint)):
        expected = render_report(
            data.analysis, data.manifest, plots=data.plots, fingerprint=named,
            probe_note=data.probe_note,
        )
        if expected == current:
            return []
        diff = diff or list(
            difflib.unified_diff(
                current.splitlines(),
                expected.splitlines(),
                f"{path} (committed)",
                f"{path} (re-rendered)",
                lineterm="",
            )
        )
    return diff

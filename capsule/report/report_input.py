"""What every report block renders from: one run's analysis, manifest and plots."""

from __future__ import annotations

from dataclasses import dataclass, field

from capsule.analysis.schema import Analysis
from capsule.machine.manifest_record import ManifestRecord


@dataclass(frozen=True)
class ReportInput:
    """The run's analysis (`capsule.analysis.schema.Analysis`), its manifest (or None) and the
    plots that exist for the run (file names relative to the run directory); a probe's note (its
    probe.json `note`), None for any other run."""

    analysis: Analysis
    manifest: ManifestRecord | None = None
    plots: tuple[str, ...] = field(default_factory=tuple)
    probe_note: str | None = None

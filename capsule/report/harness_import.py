"""What `capsule import-samples` prints: per imported file, both sides' metrics with the letter band,
every instruction where the harness's stored verdict differs from ours (with its reason), and the
paired comparison of two files. Everything printed is read from the import record (import.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capsule.analysis.paired_schema import Bounds
from capsule.report.formatting import fmt_interval, fmt_p, fmt_pct, in_metric_order, plural

LISTED = 40  # disagreements printed per file; import.json holds every one


def _verdict(flag: bool) -> str:
    return "pass" if flag else "fail"


def arm_lines(name: str, summary: Mapping[str, Any]) -> list[str]:
    """One imported file: metrics, the band, and the disagreements."""
    lines = [
        f"{name}: {summary['n']} samples, {summary['layout']}",
        f"  file {summary['file']} (sha256 {summary['file_sha256'][:16]}...)",
    ]
    scored = ", ".join(f"{name} ({count})" for name, count in summary.get("scored_text", {}).items())
    if scored:
        lines.append(f"  text scored: {scored}")
    cut = summary.get("truncated_inputs", [])
    if cut:
        keys = ", ".join(str(item["key"]) for item in cut[:LISTED])
        lines.append(f"  WARNING: {plural(len(cut), 'input')} left-truncated by the harness (keys {keys}): "
                     "the model answered a prompt it never saw whole; raise the harness's max length")
    if summary["think_blocks_removed"]:
        lines.append(f"  {plural(summary['think_blocks_removed'], 'response')} scored without its <think> "
                     "block, as the harness scores it")
    band = summary["band"]["metrics_pct"]
    ours, stored = summary["metrics_pct"]["ours"], summary["metrics_pct"]["harness"]
    other = sum(item["reason"] != "random-letter" for item in summary["disagreements"])
    others = f" ({plural(other, 'other difference')} below)" if other else ""
    lines.append(f"  {'metric':<26}{'harness':>9}{'ours':>9}   letter band (ours, seed {summary['seed']})")
    for metric in in_metric_order(ours):
        span = band.get(metric)
        shown = fmt_interval(Bounds(span["low"], span["high"])) if span else ""
        inside = "" if span is None else "  harness " + (
            "inside" if summary["harness_in_band"][metric] else "outside" + others
        )
        values = f"{fmt_pct(stored[metric]):>9}{fmt_pct(ours[metric]):>9}"
        lines.append(f"  {metric:<26}{values}   {shown}{inside}")
    keys = summary["band"]["ambiguous_keys"]
    lines.append(f"  letter band: {plural(len(keys), 'prompt')} draw a random letter"
                 + (f" (keys {', '.join(map(str, keys))})" if keys else ""))
    found = summary["disagreements"]
    counts = ", ".join(f"{reason} {count}" for reason, count in summary["reason_counts"].items())
    lines.append(f"  {plural(len(found), 'instruction')} where the harness's verdict differs from ours"
                 + (f": {counts}" if counts else ""))
    for item in found[:LISTED]:
        readings = ", ".join(
            f"{r} harness {_verdict(item['harness'][r])} / ours {_verdict(item['ours'][r])}"
            for r in item["readings"]
        )
        lines.append(
            f"  - key {item['key']} {item['instruction_id']}: {readings}; {item['reason']} ({item['where']})"
        )
    if len(found) > LISTED:
        lines.append(f"  ... {len(found) - LISTED} more in import.json")
    for reason, text in summary["reasons"].items():
        lines.append(f"  {reason}: {text}")
    return lines


def paired_lines(paired: Mapping[str, Any]) -> list[str]:
    """The comparison of two imports, on our verdicts and on the stored ones."""
    lines = []
    for label, side in (("ours", paired["ours"]), ("harness", paired["harness"])):
        a, b = side["arms"]
        difference = side["difference"]
        interval = "" if difference is None else (
            f", difference {fmt_pct(difference['value_pct'])} "
            + fmt_interval(Bounds(difference["interval"]["low_pct"], difference["interval"]["high_pct"]))
        )
        lines.append(
            f"{a} vs {b} on {side['metric']} ({label} verdicts): {side['n_pairs']} pairs, b {side['b']}, "
            f"c {side['c']}, exact McNemar p {fmt_p(side['p_value'])}{interval}: {side['verdict']}"
        )
    lines.append(f"rule: {paired['ours']['rule']}")
    return lines


def import_lines(record: Mapping[str, Any]) -> list[str]:
    """Everything the command prints, from the import record."""
    lines = []
    for name, summary in record["arms"].items():
        lines += arm_lines(name, summary)
    if record.get("paired"):
        lines += paired_lines(record["paired"])
    return lines

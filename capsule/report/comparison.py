"""Markdown for `capsule compare`: two runs of one plan side by side, from the `RunComparison` it computed.

Every number goes through `capsule.report.formatting`, as in RESULTS.md. One table of arms
(identical responses, first divergence, pass/fail changes on the claim's metric, the claim metric's
difference A - B with its interval and McNemar p), one table of every metric's difference per arm,
the verdicts side by side, and the manifests' numerics-relevant differences as candidate causes.
A committed comparison file is written new (`write_comparison_file`); `capsule.report.numbers`
rewrites its regions (`--update`) and checks them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from capsule.analysis.compare import RunComparison, RunSide
from capsule.analysis.control_schema import Identity
from capsule.analysis.paired_schema import Paired
from capsule.atomic import write_text_atomic
from capsule.errors import BadInputError
from capsule.machine.diff import Difference
from capsule.report.formatting import DASH, METRIC_LABELS, fmt_count, fmt_num, fmt_p, fmt_pct


def _divergence(identity: Identity) -> str:
    first = identity.first_divergence
    if not first.n:
        return DASH
    unit = first.unit or "tokens"
    return f"{fmt_num(first.median)} ({first.min}–{first.max}) {unit}"


def _difference(paired: Paired) -> str:
    difference = paired.difference
    if difference is None:
        return DASH
    low, high = difference.interval.low_pct, difference.interval.high_pct
    return f"{fmt_pct(difference.value_pct)} [{fmt_pct(low)}, {fmt_pct(high)}]"


def _arm_rows(comparison: RunComparison) -> list[str]:
    metric = comparison.claim.metric
    label = METRIC_LABELS.get(metric, metric)
    lines = [
        f"| arm | identical responses | first divergence, median (min–max) | pass/fail changed | "
        f"{label} A − B [95% CI] | McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for arm in comparison.arms:
        identity, paired = arm.identity, arm.metrics[metric]
        lines.append(
            f"| `{arm.arm}` | {fmt_count(identity.identical_response, identity.n_common)} | "
            f"{_divergence(identity)} | {arm.pass_fail_changed} | {_difference(paired)} | "
            f"{fmt_p(paired.p_value)} |"
        )
    return lines


def _metric_rows(comparison: RunComparison) -> list[str]:
    metrics = list(comparison.arms[0].metrics) if comparison.arms else []
    lines = [
        "| arm | " + " | ".join(METRIC_LABELS.get(m, m) for m in metrics) + " |",
        "|---|" + "---|" * len(metrics),
    ]
    for arm in comparison.arms:
        cells = [f"{_difference(arm.metrics[m])}, p {fmt_p(arm.metrics[m].p_value)}" for m in metrics]
        lines.append(f"| `{arm.arm}` | " + " | ".join(cells) + " |")
    return lines


def _agree(agree: bool) -> str:
    return "yes" if agree else "NO"


def _verdict_rows(comparison: RunComparison) -> list[str]:
    claim = comparison.claim
    lines = ["| verdict | A | B | agree |", "|---|---|---|---|"]
    lines.append(
        f"| claim ({claim.metric} on `{claim.arm}`) | {claim.a} | {claim.b} | {_agree(claim.agree)} |"
    )
    for name, row in comparison.comparisons.items():
        lines.append(f"| comparison `{name}` | {row.a} | {row.b} | {_agree(row.agree)} |")
    return lines


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _cause_rows(comparison: RunComparison) -> list[str]:
    causes = comparison.candidate_causes
    if not causes:
        return ["None: the manifests agree on every field that can change numerics."]
    lines = ["| field | A | B | why it can matter |", "|---|---|---|---|"]
    for cause in causes:
        lines.append(f"| `{cause.path}` | {_value(cause.a)} | {_value(cause.b)} | {cause.reason} |")
    return lines


def _run_line(label: str, run: RunSide) -> str:
    """One run as verified, in words that stay true while the ledger grows (no entry count)."""
    where = (
        f"recorded in this ledger at entry {run.ledger_seq}" if run.ledger_seq is not None
        else "not in this ledger (signature and digests only)"
    )
    return (
        f"- {label}: `{run.path}` (run {run.run_id}): {run.n_files} files ({run.total_bytes} "
        f"bytes) match its signed bundle; signed by {run.fingerprint[:16]}, trusted {run.trusted_by}; "
        f"{where}"
    )


def _identical_arms(comparison: RunComparison) -> int:
    return sum(arm.responses_differ == 0 for arm in comparison.arms)


def _changed_arms(comparison: RunComparison) -> list[str]:
    """`arm` (N responses, M pass/fail) for each arm whose responses differ, in plan order."""
    return [
        f"`{arm.arm}` ({arm.responses_differ} responses, {arm.pass_fail_changed} pass/fail)"
        for arm in comparison.arms if arm.responses_differ
    ]


def _plan_path(comparison: RunComparison) -> object:
    return (comparison.plan or {}).get("path")


def comparison_summary(comparison: RunComparison) -> str:
    """One paragraph for a README: identical arms, what changed where, the claim's verdicts, the causes."""
    arms, claim = comparison.arms, comparison.claim
    differ = sum(arm.responses_differ for arm in arms)
    flips = sum(arm.pass_fail_changed for arm in arms)
    changed = _changed_arms(comparison)
    label = METRIC_LABELS.get(claim.metric, claim.metric)
    where = f": {', '.join(changed)}" if changed else ""
    verdict = (
        f"the claim's verdict is {claim.a} in both" if claim.agree
        else f"the claim's verdict is {claim.a} in A and {claim.b} in B"
    )
    causes = [cause.path for cause in comparison.candidate_causes]
    cause_text = (
        f"The manifests differ in {len(causes)} field(s) that can change numerics: "
        + ", ".join(f"`{c}`" for c in causes) + "."
        if causes else "The manifests agree on every field that can change numerics."
    )
    return (
        f"Runs {comparison.runs['A'].run_id} (A) and {comparison.runs['B'].run_id} (B) of "
        f"`{_plan_path(comparison)}`: {_identical_arms(comparison)} of {len(arms)} arms "
        f"byte-identical in every response; {differ} responses and {flips} pass/fail outcomes on {label} "
        f"differ{where}; {verdict}. {cause_text}"
    )


def render_comparison(comparison: RunComparison) -> str:
    """The Markdown report of a `compare_runs` result."""
    runs, arms = comparison.runs, comparison.arms
    lines = [
        f"# Two runs of `{_plan_path(comparison)}` compared",
        "",
        _run_line("A", runs["A"]),
        _run_line("B", runs["B"]),
        "",
        f"{_identical_arms(comparison)} of {len(arms)} arms byte-identical in every response; differences "
        "are A − B in percentage points on the prompts both runs scored.",
        "",
        *_arm_rows(comparison),
        "",
        "## Every metric, A − B [95% CI], exact McNemar p",
        "",
        *_metric_rows(comparison),
        "",
        "## Verdicts",
        "",
        *_verdict_rows(comparison),
        "",
        "## Candidate causes: manifest differences that can change numerics",
        "",
        *_cause_rows(comparison),
        *_arm_machine_rows(comparison),
    ]
    return "\n".join(lines) + "\n"


def _arm_machine_rows(comparison: RunComparison) -> list[str]:
    """The arms lanes on a Ray cluster generated on another node than their run's machine, each with
    the two machines and their numerics-relevant differences (nothing for runs of one machine each)."""
    if not comparison.arm_machines:
        return []
    lines = [
        "",
        "## Arms generated on other Ray nodes: the two machines, and what differs that can change numerics",
        "",
        "| arm | A | B | differences |",
        "|---|---|---|---|",
    ]
    for arm in comparison.arm_machines:
        causes = ", ".join(f"`{cause.path}`" for cause in arm.causes) or (
            "none" if "machines" not in arm.a + arm.b else "not diffed (several machines on one side)"
        )
        lines.append(f"| {arm.arm} | {arm.a} | {arm.b} | {causes} |")
    return lines


def comparison_block(comparison: RunComparison) -> str:
    """The whole comparison report, as a committed comparison file quotes it."""
    return render_comparison(comparison).rstrip("\n")


#: Block name -> renderer of a `compare_runs` result: what `block=` may say in a region with `against=`.
COMPARISON_BLOCKS: dict[str, Callable[[RunComparison], str]] = {
    "comparison": comparison_block,
    "comparison_summary": comparison_summary,
}


def marked_comparison(block: str, comparison: RunComparison) -> str:
    """Block `block` of `comparison` between its markers, the runs named as in `comparison.runs`."""
    runs = comparison.runs
    return "\n".join([
        f"<!-- capsule:numbers run={runs['A'].path} against={runs['B'].path} block={block} -->",
        COMPARISON_BLOCKS[block](comparison),
        "<!-- /capsule:numbers -->",
    ])


def _keep(out: Path) -> str:
    return f"rewrite its comparison with --update {out}, or choose a new path"


def refuse_existing(out: Path) -> None:
    """BadInputError when `out` exists: a comparison file is written new, never over another file
    (checked before the comparison's work; `write_comparison_file` checks again as it writes)."""
    if os.path.lexists(out):
        raise BadInputError(f"{out}: exists; {_keep(out)}")


def write_comparison_file(out: Path, comparison: RunComparison, runs: tuple[Path, Path]) -> None:
    """Write the new Markdown file `out`: the whole comparison between its markers, its runs named
    relative to the file's directory (what the markers' run= and against= say), so `capsule
    check-numbers out` keeps it true. Refuses an `out` that exists, even one that appeared meanwhile."""
    names = tuple(Path(os.path.relpath(run.resolve(), out.resolve().parent)).as_posix() for run in runs)
    document = comparison.named((names[0], names[1]))
    write_text_atomic(out, marked_comparison("comparison", document) + "\n", new=_keep(out))


def _cause_words(cause: Difference) -> str:
    """`path (A here, B there)`, or only the path where a value is long (a digest, a flag list)."""
    a, b = _value(cause.a), _value(cause.b)
    return cause.path if max(len(a), len(b)) > 24 else f"{cause.path} ({a} here, {b} there)"


def against_reference_lines(comparison: RunComparison) -> list[str]:
    """A few lines saying whether run A (a new run) reproduces run B (the committed reference run of its
    plan): identical or which arms differ, the verdicts that changed, the manifest differences that can
    change numerics. What `capsule reproduce` prints at its end; the whole comparison goes to a file."""
    arms, claim = comparison.arms, comparison.claim
    changed = [arm for arm in arms if arm.responses_differ]
    if not changed:
        identity = (
            f"identical: every response of all {len(arms)} arms is byte-identical to the reference run's"
        )
    else:
        listed = ", ".join(
            f"{arm.arm} ({arm.responses_differ} of {arm.identity.n_common} responses, "
            f"{arm.pass_fail_changed} pass/fail)" for arm in changed
        )
        identity = (
            f"differs: {len(changed)} of {len(arms)} arms give other responses than the reference run "
            f"({len(arms) - len(changed)} byte-identical): {listed}"
        )
    flipped = [f"claim {claim.a} here, {claim.b} in the reference"] if not claim.agree else []
    flipped += [f"{name} {row.a} here, {row.b} in the reference"
                for name, row in comparison.comparisons.items() if not row.agree]
    verdicts = (
        f"verdicts: {len(flipped)} changed: {'; '.join(flipped)}" if flipped
        else f"verdicts: all the same (the claim is {claim.a} in both)"
    )
    causes = comparison.candidate_causes
    machines = (
        f"machines: {len(causes)} manifest difference(s) that can change numerics: "
        + ", ".join(_cause_words(cause) for cause in causes[:6])
        + (f", and {len(causes) - 6} more" if len(causes) > 6 else "")
        if causes else "machines: the manifests agree on every field that can change numerics"
    )
    return [identity, verdicts, machines]

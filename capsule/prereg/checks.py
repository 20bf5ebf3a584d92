"""Whole-plan validation: every cross-reference, and that each control compares what it claims to.

`capsule.prereg.loader` checks each table alone; `check_plan` then checks the plan as a whole, so a
plan that names a missing arm, a rerun that is not identical, or a seed-by-batch grid with a hole is
refused before anything runs. Messages name the plan file and the table, as the loader's do.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from capsule.jsonio import read_jsonl
from capsule.pins import IFEVAL_PROMPTS_SHA256
from capsule.prereg.backend_specs import SPECS
from capsule.prereg.control_kinds import control_kind, resolve
from capsule.prereg.metrics import COMPOSITES, METRICS
from capsule.prereg.plan import Arm, Control, Plan

# Fields that may always differ between a control's arms (each kind adds its own: `control_kinds`).
_BOOKKEEPING = ("name", "description", "max_prompts", "max_wall_minutes")


def _fail(plan: Plan, where: str, message: str) -> BadInputError:
    return BadInputError(f"{plan.path}: {where}: {message}")


def _unique(plan: Plan, label: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise _fail(plan, f"{label} {name!r}", f"two {label}s share the name {name!r}")
        seen.add(name)


def _blank(arm: Arm, fields: tuple[str, ...]) -> Arm:
    """The arm with `fields` (and bookkeeping) set to neutral values, for "same except" checks."""
    neutral: dict[str, Any] = {
        "name": "",
        "description": "",
        "max_prompts": 0,
        "max_wall_minutes": 0.0,
        "batch_size": 1,
        "seed": 0,
        "backend": "fake",
        "backend_options": {},
        "env": {},
        "hardware": "",
    }
    return replace(arm, **{f: neutral[f] for f in _BOOKKEEPING + fields})


def _differences(a: Arm, b: Arm) -> list[str]:
    return [f for f in Arm.__dataclass_fields__ if getattr(a, f) != getattr(b, f)]


def check_control(plan: Plan, control: Control) -> None:
    """Check one control's arms against its kind's row in `capsule.prereg.control_kinds`."""
    where = f"control {control.name!r}"
    kind = control_kind(control.kind)
    for name in control.arms:
        if name not in {a.name for a in plan.arms}:
            raise _fail(plan, where, f"unknown arm {name!r} (arms: {', '.join(a.name for a in plan.arms)})")
    if len(set(control.arms)) != len(control.arms):
        raise _fail(plan, where, "an arm is listed twice")
    arms = [plan.arm(name) for name in control.arms]
    low, high = kind.arms
    if not low <= len(arms) <= high:
        wanted = f"exactly {low}" if low == high else f"at least {low}"
        raise _fail(plan, where, f"kind {control.kind!r} reads {wanted} arm(s), got {len(arms)}")
    if kind.may_differ is not None:
        _check_same_except(plan, where, control.kind, arms, kind.may_differ)
    if kind.check is not None:
        resolve(kind.check)(plan, where, control, arms)


def _check_same_except(plan: Plan, where: str, kind: str, arms: list[Arm], fields: tuple[str, ...]) -> None:
    """The arms are identical but for `fields` and bookkeeping."""
    base = _blank(arms[0], fields)
    for other in arms[1:]:
        if _blank(other, fields) != base:
            diff = ", ".join(_differences(_blank(other, fields), base))
            allowed = f"may vary only {', '.join(fields)}" if fields else "needs arms identical but for names"
            raise _fail(
                plan,
                where,
                f"arms {arms[0].name!r} and {other.name!r} differ in {diff}; a {kind} control {allowed}",
            )


def check_batch_sizes(plan: Plan, where: str, control: Control, arms: list[Arm]) -> None:
    """A batch-size control: every arm at its own batch size."""
    if len({a.batch_size for a in arms}) != len(arms):
        raise _fail(plan, where, "each arm needs a different batch_size")


def check_backends(plan: Plan, where: str, control: Control, arms: list[Arm]) -> None:
    """A backend control: two arms on two backends."""
    if arms[0].backend == arms[1].backend:
        raise _fail(plan, where, "the two arms need different backends")


def check_devices(plan: Plan, where: str, control: Control, arms: list[Arm]) -> None:
    """A cross-device control: one arm on two devices. Either two hardware kinds of Ray cluster node
    (`hardware`, each arm naming its own; any backend, the backend options equal; docs/cluster.md),
    or on one host hf's `device` (unset, the default device, or cuda:0, against cuda:1), the backend
    options differing in `device` only: a device the host lacks refuses that arm at load
    (`capsule.generation.backends.hf`), so the control reads not run."""
    kinds = [arm.hardware for arm in arms]
    if kinds[0] != kinds[1]:
        if not all(kinds):
            raise _fail(plan, where, "cross-device arms on two hardware kinds must each name theirs")
        if arms[0].backend_options != arms[1].backend_options:
            raise _fail(plan, where, "cross-device arms on two hardware kinds need the same backend_options")
        return
    a, b = (dict(arm.backend_options) for arm in arms)
    if not all("device" in SPECS[arm.backend].options for arm in arms):
        raise _fail(plan, where, "cross-device arms must use the hf backend (its `device` option)")
    if {k: v for k, v in a.items() if k != "device"} != {k: v for k, v in b.items() if k != "device"}:
        raise _fail(plan, where, "the two arms' backend_options may differ only in `device`")
    if a.get("device") == b.get("device"):
        raise _fail(plan, where, "the two arms need different devices (e.g. the default and cuda:1)")


def check_seed_grid(plan: Plan, where: str, control: Control, arms: list[Arm]) -> None:
    """A seed-vs-batch control: sampling arms forming a full grid of seeds by batch sizes."""
    if any(a.decoding.mode != "sample" for a in arms):
        raise _fail(plan, where, "seed-vs-batch arms must sample (mode 'sample')")
    cells = [(a.seed, a.batch_size) for a in arms]
    seeds, batches = {c[0] for c in cells}, {c[1] for c in cells}
    if len(seeds) < 2 or len(batches) < 2 or sorted(cells) != sorted((s, b) for s in seeds for b in batches):
        raise _fail(plan, where, f"arms must form a full grid of >= 2 seeds x >= 2 batch sizes, got {cells}")


def check_compliant(plan: Plan, where: str, control: Control, arms: list[Arm]) -> None:
    """A scorer-sanity control: its hand-written compliant answers are readable and well formed."""
    _check_compliant(plan, where, control.compliant)


def _check_compliant(plan: Plan, where: str, relative: str) -> None:
    """The hand-written compliant answers: a JSONL file inside the plan directory, {key, response}."""
    directory = Path(plan.path).parent
    path = directory / relative
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise _fail(plan, where, f"compliant = {relative!r} must be a path inside the plan directory")
    if not path.is_file():
        raise _fail(plan, where, f"compliant file {path} does not exist")
    keys: set[int] = set()
    try:
        lines = read_jsonl(path, "compliant answers file")
    except BadInputError as error:
        raise _fail(plan, where, str(error)) from None
    for number, row in lines:
        ok = (
            isinstance(row, dict)
            and set(row) == {"key", "response"}
            and isinstance(row["key"], int)
            and not isinstance(row["key"], bool)
            and isinstance(row["response"], str)
        )
        if not ok:
            raise _fail(
                plan, where, f'{path}:{number}: each line must be {{"key": <int>, "response": <str>}}'
            )
        if row["key"] in keys:
            raise _fail(plan, where, f"{path}:{number}: key {row['key']} appears twice")
        keys.add(row["key"])
    if not keys:
        raise _fail(plan, where, f"{path} holds no answers")


def _subsets_overlap(plan: Plan, a: Arm, b: Arm) -> bool:
    """Whether two arms' subsets certainly share their prompts: equal, nested "first n", or one is "all"."""
    sa, sb = plan.prompts.subsets[a.subset], plan.prompts.subsets[b.subset]
    return sa == sb or "all" in (sa.rule, sb.rule) or (sa.rule == sb.rule == "first")


def check_plan(plan: Plan) -> None:
    """Validate the plan as a whole: names, references, control consistency, the verdict rule."""
    _unique(plan, "arm", [a.name for a in plan.arms])
    _unique(plan, "control", [c.name for c in plan.controls])
    _unique(plan, "comparison", [c.name for c in plan.comparisons])
    if not plan.arms:
        raise _fail(plan, "top level", "declare at least one [[arms]] table")
    if plan.prompts.sha256 != IFEVAL_PROMPTS_SHA256:
        raise _fail(
            plan,
            "[prompts]",
            f"sha256 {plan.prompts.sha256} is not the pinned prompt file; the capsule fetches and scores "
            f"only {IFEVAL_PROMPTS_SHA256} (capsule/pins.py), so seal that",
        )
    for arm in plan.arms:
        if arm.subset not in plan.prompts.subsets:
            raise _fail(
                plan,
                f"arm {arm.name!r}",
                f"unknown subset {arm.subset!r} (declared: {', '.join(plan.prompts.subsets)})",
            )
    for control in plan.controls:
        check_control(plan, control)
    arm_names = {a.name for a in plan.arms}
    for comparison in plan.comparisons:
        where = f"comparison {comparison.name!r}"
        for name in comparison.arms:
            if name not in arm_names:
                raise _fail(plan, where, f"unknown arm {name!r}")
        if comparison.metric not in METRICS:
            raise _fail(
                plan,
                where,
                f"paired comparisons use a per-prompt or per-instruction metric "
                f"({', '.join(METRICS)}), not the composite {comparison.metric!r}",
            )
        a, b = (plan.arm(n) for n in comparison.arms)
        if not _subsets_overlap(plan, a, b):
            raise _fail(
                plan,
                where,
                f"arms {a.name!r} ({a.subset}) and {b.name!r} ({b.subset}) must share "
                "their prompts: use the same subset, or one on 'all'",
            )
    rule = plan.verdict
    if rule.arm not in arm_names:
        raise _fail(plan, "[verdict]", f"unknown arm {rule.arm!r}")
    if rule.metric != plan.claim.metric:
        raise _fail(
            plan, "[verdict]", f"metric {rule.metric!r} must be the claim's reading {plan.claim.metric!r}"
        )
    if rule.metric in COMPOSITES and rule.interval != "bootstrap":
        raise _fail(
            plan,
            "[verdict]",
            f"{rule.metric!r} averages two proportions; only 'bootstrap' gives its interval",
        )
    if rule.interval == "bootstrap" and rule.bootstrap_resamples < 1000:
        raise _fail(plan, "[verdict]", "bootstrap_resamples must be at least 1000")

"""Parse one [[arms]] table of a plan: its settings, decoding, backend options and environment.

Every setting that can change a result is required. Backend options are checked against the
backend's own declaration in `capsule.prereg.backend_specs`, so the plan format and the backend
agree by construction. `capsule.prereg.loader` calls `parse_arm` for each arm of a plan.
"""

from __future__ import annotations

import re

from capsule.prereg.backend_options import check_options
from capsule.prereg.backend_specs import BACKENDS
from capsule.prereg.limits import BATCH_SIZE, MAX_NEW_TOKENS
from capsule.prereg.numerics_env import env_problem
from capsule.prereg.plan import (
    BATCH_ORDERS,
    DECODING_MODES,
    DTYPES,
    THINKING,
    UNCLOSED,
    Arm,
    Decoding,
)
from capsule.prereg.tables import Section

#: The only values mode "greedy" takes (argmax, no penalties; top_k 0, or -1, disables): greedy with
#: a temperature or a penalty would be sampling under another name.
GREEDY_NEUTRAL: dict[str, float | int] = {
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
}


# The keys of an [[arms]] table and of its [arms.decoding] table, (required, optional): read here and
# written by `capsule.authoring.plan_toml`.
ARM_KEYS = (
    (
        "name",
        "backend",
        "subset",
        "dtype",
        "batch_size",
        "batch_order",
        "seed",
        "max_new_tokens",
        "thinking",
        "unclosed",
        "decoding",
        "backend_options",
        "env",
    ),
    ("max_prompts", "max_wall_minutes", "description", "hardware"),
)
HARDWARE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")  # a Ray resource name
DECODING_KEYS = (
    ("mode", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "repetition_penalty"),
    (),
)


def parse_decoding(arm: Section) -> Decoding:
    """[arms.decoding]: every knob explicit; greedy requires the neutral values (no hidden sampling)."""
    s = arm.sub("decoding", "decoding")
    s.keys(*DECODING_KEYS)
    decoding = Decoding(
        mode=s.choice("mode", DECODING_MODES),
        temperature=s.number("temperature", 0.0, 10.0),
        top_p=s.number("top_p", 0.0, 1.0),
        top_k=s.integer("top_k", -1),
        min_p=s.number("min_p", 0.0, 1.0),
        presence_penalty=s.number("presence_penalty", -2.0, 2.0),
        repetition_penalty=s.number("repetition_penalty", 0.0, 10.0),
    )
    if decoding.mode == "greedy":
        for knob, value in GREEDY_NEUTRAL.items():
            if knob != "top_k" and getattr(decoding, knob) != value:
                raise s.fail(
                    f"mode 'greedy' takes {knob} = {value} (argmax, no penalties); use mode 'sample'"
                )
        if decoding.top_k not in (0, -1):
            raise s.fail("mode 'greedy' takes top_k = 0 or -1 (disabled); use mode 'sample'")
    else:
        if decoding.temperature <= 0.0 or decoding.top_p <= 0.0 or decoding.repetition_penalty <= 0.0:
            raise s.fail("mode 'sample' needs temperature > 0, top_p > 0 and repetition_penalty > 0")
    return decoding


def _options(arm: Section, backend: str) -> dict[str, object]:
    """[arms.backend_options], checked against the backend's declaration (`backend_specs.SPECS`)."""
    s = arm.sub("backend_options", "backend_options")
    return check_options(backend, s.data, f"{s.file}: {s.where}", plan=True)


def _env(arm: Section) -> dict[str, str]:
    """[arms.env]: environment variables set while the arm's backend is loaded and run, each one of
    the numerics variables of `capsule.prereg.numerics_env` (the allow-list)."""
    s = arm.sub("env", "env")
    for key, value in s.data.items():
        problem = env_problem(key, value)
        if problem is not None:
            raise s.fail(problem)
    return dict(s.data)


def parse_arm(s: Section) -> Arm:
    """One [[arms]] table."""
    s.keys(*ARM_KEYS)
    backend = s.choice("backend", BACKENDS)
    return Arm(
        name=s.file_name(),
        backend=backend,
        subset=s.text("subset"),
        dtype=s.choice("dtype", DTYPES),
        batch_size=s.integer("batch_size", 1, limit=BATCH_SIZE),
        batch_order=s.choice("batch_order", BATCH_ORDERS),
        seed=s.integer("seed", 0),
        max_new_tokens=s.integer("max_new_tokens", 1, limit=MAX_NEW_TOKENS),
        thinking=s.choice("thinking", THINKING),
        unclosed=s.choice("unclosed", UNCLOSED),
        decoding=parse_decoding(s),
        backend_options=_options(s, backend),
        env=_env(s),
        max_prompts=s.integer("max_prompts", 0, default=0),
        max_wall_minutes=s.number("max_wall_minutes", 0.0, 1e6, default=0.0),
        description=s.text("description", default=""),
        hardware=_hardware(s),
    )


def _hardware(s: Section) -> str:
    hardware = s.text("hardware", default="")
    if hardware and not HARDWARE_RE.fullmatch(hardware):
        raise s.fail(
            f"hardware {hardware!r} is not a Ray resource name (letters, digits, _ . : -, at most 64): "
            "e.g. \"accelerator_type:H100\" or a custom resource the nodes are started with (docs/cluster.md)"
        )
    return hardware

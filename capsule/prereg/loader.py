"""Load a plan: TOML -> the frozen dataclasses of `capsule.prereg.plan`, with every key and type checked.

The layout is documented in `prereg/README.md`. Every setting that can change a result is required
(no defaults); unknown keys are errors that list the allowed ones. This module checks each table on
its own; `capsule.prereg.checks` then checks the whole plan (cross-references, control consistency)
before `load_plan` returns, so nothing runs on a plan that is wrong anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError
from capsule.jsonio import read_input_bytes
from capsule.prereg.arms import parse_arm
from capsule.prereg.backend_specs import MODEL_LOADERS
from capsule.prereg.checks import check_plan
from capsule.prereg.control_kinds import CONTROL_KINDS, control_kind
from capsule.prereg.limits import BOOTSTRAP_RESAMPLES, PROMPTS, STABILITY_REPEATS, TABLES
from capsule.prereg.metrics import ALL_METRICS
from capsule.prereg.plan import (
    Claim,
    Comparison,
    Control,
    Model,
    Plan,
    PromptSet,
    Subset,
    VerdictRule,
)
from capsule.prereg.tables import Section, parse_toml
from capsule.run_dir import hub_repo_problem, model_file_problem, name_problem

PLAN_FILE = "plan.toml"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

MODEL_SOURCES = ("embedded", "hub", "path")
LOADERS = tuple(MODEL_LOADERS)
INTERVALS = ("wilson", "clopper_pearson", "bootstrap")

# The keys of each table, (required, optional): the loader checks them and `capsule.authoring.plan_toml`
# writes them, so a key is named once. The arm and decoding keys live in `capsule.prereg.arms`, a
# control's in its kind's row of `capsule.prereg.control_kinds`.
PLAN_KEYS = (
    ("name", "scorer_seed", "model", "claim", "prompts", "arms", "verdict"),
    ("description", "amends", "amend_reason", "controls", "comparisons", "evidence"),
)
MODEL_KEYS = (("name", "source", "files", "loader"), ())
HUB_KEYS = ("repo", "revision")  # required for source "hub", refused for any other
CLAIM_KEYS = (("text", "value", "metric", "other_readings", "source"), ())
PROMPTS_KEYS = (("sha256", "subsets"), ())
SUBSET_KEYS: dict[str, tuple[str, ...]] = {  # a subset's rule -> its keys (all required)
    "all": ("rule",),
    "first": ("rule", "n"),
    "seeded_sample": ("rule", "n", "seed"),
}
SUBSET_RULES = tuple(SUBSET_KEYS)
COMPARISON_KEYS = (("name", "arms", "metric", "confidence"), ("description",))
VERDICT_KEYS = (
    ("arm", "metric", "interval", "confidence", "min_n", "bootstrap_resamples", "bootstrap_seed",
     "min_pairs"),
    (),
)


def _sha(section: Section, key: str, value: Any) -> str:
    if not isinstance(value, str) or not SHA256_RE.match(value):
        raise section.fail(f"{key!r} must be a full lowercase hex sha256 (64 characters), got {value!r}")
    return value


def parse_model(top: Section) -> Model:
    """[model] and [model.files]."""
    s = top.sub("model", "[model]")
    s.keys(MODEL_KEYS[0], HUB_KEYS)
    source = s.text("source", MODEL_SOURCES)
    files = s.sub("files", "[model.files]")
    if not files.data:
        raise files.fail("pin at least one file (relative path = sha256)")
    for name in files.data:
        problem = model_file_problem(name)
        if problem is not None:
            raise files.fail(f"file {problem}; name each file of the model directory by its name alone")
    pinned = {str(path): _sha(files, str(path), digest) for path, digest in sorted(files.data.items())}
    repo = revision = ""
    if source == "hub":
        s.keys(MODEL_KEYS[0] + HUB_KEYS)
        repo = s.text("repo")
        if (problem := hub_repo_problem(repo)) is not None:
            raise s.fail(f"'repo' {problem}; write the model's id as the hub shows it")
        revision = s.text("revision")
        if not re.match(r"^[0-9a-f]{40}$", revision):
            raise s.fail(f"'revision' must be a full 40-hex commit, got {revision!r}")
    elif "repo" in s.data or "revision" in s.data:
        raise s.fail(f"'repo' and 'revision' belong to source 'hub', not {source!r}")
    return Model(s.text("name"), source, pinned, repo, revision, s.text("loader", LOADERS))


def parse_claim(top: Section) -> Claim:
    """[claim]: the card's number and how the plan reads it."""
    s = top.sub("claim", "[claim]")
    s.keys(*CLAIM_KEYS)
    metric = s.text("metric", ALL_METRICS)
    others = s.names("other_readings")
    for other in others:
        if other not in ALL_METRICS:
            raise s.fail(f"other_readings: unknown metric {other!r} (known: {', '.join(ALL_METRICS)})")
    if metric in others or len(set(others)) != len(others):
        raise s.fail("other_readings must be distinct and must not repeat 'metric'")
    return Claim(s.text("text"), s.number("value", 0.0, 100.0), metric, others, s.text("source"))


def parse_prompts(top: Section) -> PromptSet:
    """[prompts] and its [prompts.subsets.NAME] tables."""
    s = top.sub("prompts", "[prompts]")
    s.keys(*PROMPTS_KEYS)
    sha = _sha(s, "sha256", s.data["sha256"])
    subsets_table = s.sub("subsets", "[prompts.subsets]")
    if not subsets_table.data:
        raise subsets_table.fail("declare at least one subset")
    if len(subsets_table.data) > TABLES.high:
        raise subsets_table.fail(f"{len(subsets_table.data)} subsets; a plan may have at most {TABLES.high}")
    subsets: dict[str, Subset] = {}
    for name, table in subsets_table.data.items():
        sub = Section(s.file, f"subset {name!r}", table)
        problem = name_problem(name)
        if problem is not None:
            raise sub.fail(f"name {problem}")
        rule = sub.text("rule", SUBSET_RULES)
        required = SUBSET_KEYS[rule]
        sub.keys(required)
        n = sub.integer("n", 1, limit=PROMPTS) if "n" in required else 0
        seed = sub.integer("seed", 0) if "seed" in required else 0
        subsets[name] = Subset(name, rule, n, seed)
    return PromptSet(sha, subsets)


def parse_control(s: Section) -> Control:
    """One [[controls]] table; its kind's row in `capsule.prereg.control_kinds` says which keys it takes."""
    kind = control_kind(s.text("kind", CONTROL_KINDS))
    s.keys(kind.keys, kind.optional)
    return Control(
        name=s.file_name(),
        kind=kind.name,
        arms=s.names("arms", default=[]),
        k=s.integer("k", 2, limit=STABILITY_REPEATS) if kind.takes("k") else 0,
        compliant=s.text("compliant") if kind.takes("compliant") else "",
        description=s.text("description", default=""),
    )


def parse_comparison(s: Section) -> Comparison:
    """One [[comparisons]] table: a paired comparison of exactly two arms."""
    s.keys(*COMPARISON_KEYS)
    arms = s.names("arms")
    if len(arms) != 2 or arms[0] == arms[1]:
        raise s.fail(f"arms must name two different arms, got {list(arms)}")
    return Comparison(
        name=s.file_name(),
        arms=(arms[0], arms[1]),
        metric=s.text("metric", ALL_METRICS),
        confidence=s.number("confidence", 0.5, 0.9999),
        description=s.text("description", default=""),
    )


def parse_verdict(top: Section) -> VerdictRule:
    """[verdict]: the headline rule, as data."""
    s = top.sub("verdict", "[verdict]")
    s.keys(*VERDICT_KEYS)
    return VerdictRule(
        arm=s.text("arm"),
        metric=s.text("metric", ALL_METRICS),
        interval=s.text("interval", INTERVALS),
        confidence=s.number("confidence", 0.5, 0.9999),
        min_n=s.integer("min_n", 1, limit=PROMPTS),
        bootstrap_resamples=s.integer("bootstrap_resamples", 0, limit=BOOTSTRAP_RESAMPLES),
        bootstrap_seed=s.integer("bootstrap_seed", 0),
        min_pairs=s.integer("min_pairs", 1, limit=PROMPTS),
    )


def parse_evidence(top: Section) -> tuple[str, ...]:
    """[evidence] (optional): `signers`, the sha256 fingerprints (`capsule.evidence.signing.fingerprint_of`)
    of the public keys allowed to sign this plan's runs; more can be added later only by a sealed
    `signers` ledger entry (`capsule prereg signers`)."""
    if "evidence" not in top.data:
        return ()
    s = top.sub("evidence", "[evidence]")
    s.keys(("signers",))
    signers = s.names("signers")
    for fingerprint in signers:
        if not SHA256_RE.match(fingerprint):
            raise s.fail(
                f"signers: {fingerprint!r} is not a key fingerprint (64 lowercase hex digits, as "
                "`capsule keygen` prints it)"
            )
    if len(set(signers)) != len(signers):
        raise s.fail("signers: a fingerprint is listed twice")
    return signers


def _tables(top: Section, key: str, label: str) -> list[Section]:
    value = top.data.get(key, [])
    if not isinstance(value, list):
        raise top.fail(f"{key!r} must be an array of tables ([[{key}]])")
    if len(value) > TABLES.high:
        raise top.fail(f"{len(value)} [[{key}]] tables; a plan may have at most {TABLES.high} ({TABLES.why})")
    sections = []
    for index, table in enumerate(value):
        name = table.get("name") if isinstance(table, dict) else None
        where = f"{label} {name!r}" if isinstance(name, str) else f"{label} #{index + 1}"
        sections.append(Section(top.file, where, table))
    return sections


def parse_plan(text: str, path: Path) -> Plan:
    """Parse and validate plan text (as read from `path`); BadInputError on the first problem."""
    file = str(path)
    top = Section(file, "top level", parse_toml(text, file))
    top.keys(*PLAN_KEYS)
    amends, reason = top.text("amends", default=""), top.text("amend_reason", default="")
    if bool(amends) != bool(reason.strip()):
        raise top.fail("'amends' and 'amend_reason' go together: name the amended plan and say why")
    arm_sections = _tables(top, "arms", "arm")
    plan = Plan(
        name=top.file_name(),
        description=top.text("description", default=""),
        path=path,
        amends=amends,
        amend_reason=reason,
        model=parse_model(top),
        claim=parse_claim(top),
        prompts=parse_prompts(top),
        scorer_seed=top.integer("scorer_seed", 0),
        arms=tuple(parse_arm(s) for s in arm_sections),
        controls=tuple(parse_control(s) for s in _tables(top, "controls", "control")),
        comparisons=tuple(parse_comparison(s) for s in _tables(top, "comparisons", "comparison")),
        verdict=parse_verdict(top),
        signers=parse_evidence(top),
    )

    check_plan(plan)
    return plan


def plan_file(path: Path) -> Path:
    """The plan.toml a path names: the file itself, or `plan.toml` inside a directory; a path that
    cannot be looked at (a name too long, a loop of links) is bad input."""
    try:
        return path / PLAN_FILE if path.is_dir() else path
    except OSError as error:
        problem = error.strerror or error
        raise BadInputError(f"{path}: cannot be a plan ({problem}); give a plan's path") from None


def load_plan(path: Path) -> Plan:
    """Read `path` (a plan.toml or its directory) and validate the whole plan before returning it."""
    return read_plan(path)[0]


def read_plan(path: Path) -> tuple[Plan, bytes]:
    """`load_plan`, also returning the bytes it parsed: what a caller hashes against the seal and
    copies into a run, so the plan is read once and the bytes checked are the bytes used."""
    file = plan_file(Path(path))
    if not file.exists():
        raise BadInputError(f"{file}: no such plan file")
    data = read_input_bytes(file, "plan file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInputError(f"{file}: not UTF-8 text ({error})") from error
    return parse_plan(text, file), data

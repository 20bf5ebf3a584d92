"""The analysis.json schema: the committed reference run reads into `Analysis` and writes back
byte for byte; keys that do not fit the schema are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_runs import REPO, RUNS

from capsule.analysis.codec import analysis_from_json, read_analysis, write_analysis
from capsule.analysis.control_schema import (
    ContrastSection,
    RerunSection,
    SanitySection,
    SeedVsBatchSection,
    StabilitySection,
)
from capsule.errors import BadInputError
from capsule.prereg.control_kinds import KINDS, control_kind, resolve

REFERENCE = [run / "analysis.json" for run in RUNS]  # the committed runs, the v2 run first


@pytest.mark.parametrize("path", REFERENCE, ids=[str(p.relative_to(REPO)) for p in REFERENCE])
def test_reference_analysis_round_trips_byte_for_byte(path: Path, tmp_path: Path) -> None:
    write_analysis(tmp_path / "analysis.json", read_analysis(path))
    assert (tmp_path / "analysis.json").read_bytes() == path.read_bytes()


def test_reference_analysis_reads_into_types() -> None:
    analysis = analysis_from_json(json.loads(REFERENCE[0].read_text(encoding="utf-8")))
    kinds = {name: type(section) for name, section in analysis.controls.items()}
    assert kinds == {
        "backend": ContrastSection,
        "batch": ContrastSection,
        "rerun": RerunSection,
        "scorer-sanity": SanitySection,
        "scorer-stability": StabilitySection,
        "seed-vs-batch": SeedVsBatchSection,
    }
    primary = analysis.arms["primary"]
    strict = primary.metrics["prompt_level_strict_acc"]
    assert (strict.counts["prompt_level_strict_acc"].passed, primary.n) == (99, 541)
    # the verdict rule asks for the bootstrap; the composite has no other interval
    card = primary.metrics["card_avg_strict"]
    assert card.interval("card_avg_strict", "wilson") == card.intervals["bootstrap"]
    assert strict.interval("prompt_level_strict_acc", "wilson") == strict.intervals["wilson"]
    assert analysis.headline.readings[0].verdict == analysis.headline.verdict == "NOT REPRODUCED"


def test_keys_outside_the_schema_are_refused_by_name() -> None:
    data = json.loads(REFERENCE[0].read_text(encoding="utf-8"))
    data["arms"]["primary"]["tokens"]["extra"] = 1
    with pytest.raises(BadInputError, match=r"analysis.json.arms.primary.tokens: unknown key\(s\) extra"):
        analysis_from_json(data)
    del data["arms"]["primary"]["tokens"]["extra"]
    del data["headline"]["readings"][0]["verdict"]
    with pytest.raises(BadInputError, match=r"readings\[0\]: missing key\(s\) verdict"):
        analysis_from_json(data)


def test_control_sections_decode_by_kind_not_by_shape() -> None:
    """Each section is read as the class its kind's row names (issue 39, item 5): a section whose keys
    fit another kind's class, an unknown kind or no kind is refused by name."""
    data = json.loads(REFERENCE[0].read_text(encoding="utf-8"))
    assert {row.name: row.section.split(":")[1] for row in KINDS} == {
        "rerun_identity": "RerunSection", "batch_size": "ContrastSection", "backend": "ContrastSection",
        "cross_device": "ContrastSection", "seed_vs_batch": "SeedVsBatchSection",
        "scorer_stability": "StabilitySection", "scorer_sanity": "SanitySection",
    }
    decoded = analysis_from_json(data).controls
    for name, section in data["controls"].items():
        assert isinstance(decoded[name], resolve(control_kind(section["kind"]).section)), name
    wrong = json.loads(json.dumps(data))
    wrong["controls"]["batch"]["kind"] = "rerun_identity"  # a contrast's keys under a rerun's kind
    with pytest.raises(BadInputError, match=r"analysis.json.controls.batch: missing key\(s\) all_identical"):
        analysis_from_json(wrong)
    wrong["controls"]["batch"]["kind"] = "nope"
    with pytest.raises(BadInputError, match="controls.batch: unknown control kind 'nope'"):
        analysis_from_json(wrong)
    del wrong["controls"]["batch"]["kind"]
    with pytest.raises(BadInputError, match="controls.batch: a control section names its kind"):
        analysis_from_json(wrong)

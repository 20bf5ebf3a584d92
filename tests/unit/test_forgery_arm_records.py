"""Issue 38, items 2 and 3: a refusal is evidence like a row, and a sidecar is checked whole.

Each forgery of the sweep of 8f9ed09, performed on a real (fake-backend) run: a planted 3-field
refusal in an unfinished run (the owner's ordinary rerun used to skip the arm and sign), the same
beside a complete arm, a well-formed record of a refusal that does not answer the arm's settings,
a record whose evidence is gone or whose message was rewritten; and, on the committed reference run
signed again, a sidecar with its `manifest_digest` removed and every lane's device rewritten to
`cuda:7` on a CPU run. On 8f9ed09 the resume skips the planted arms and `verify` exits 0 for each.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fake_plan import PLAN_DIR, PLAN_NAME, fake_arm, fake_verdict, write_and_seal_fake_plan
from test_forgery import RUN, invoke, repo  # noqa: F401 - the fixture of a copy of the committed runs

from capsule.cli import cli
from capsule.evidence.signing import generate_signer, load_signing_key
from capsule.hashing import sha256_json
from capsule.pipeline.resign import sign_again
from capsule.prereg.ledger import Ledger
from capsule.run_dir import PUBLIC_KEY, RunDir

PLANTED = {"refusal_version": 1, "status": "refused", "message": "out of memory"}


def _reproduce(*extra: str) -> Result:
    return CliRunner().invoke(cli, ["reproduce", "--no-progress", "--plan", str(PLAN_DIR), *extra])


def _run(root: Path) -> RunDir:
    (path,) = (root / "results" / PLAN_NAME).iterdir()
    return RunDir(path)


def _errors(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def _unfinished(root: Path, refused: str = "") -> RunDir:
    """A fake plan run stopped at its last arm (a crash at load): arms a and b complete."""
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    body = (fake_arm("fake-a") + fake_arm("fake-no", refused, batch=2) + fake_arm("fake-b", "", batch=2)
            + fake_arm("fake-c", 'crash = "later arm"') + fake_verdict("fake-a"))
    write_and_seal_fake_plan(root, body)
    environment = dict(os.environ)
    first = _reproduce()
    os.environ.clear()  # what the run set in this process (a cache directory) is not the machine's
    os.environ.update(environment)
    assert first.exit_code == 2 and "arm 'fake-c' failed" in first.stderr, first.stderr
    return _run(root)


def test_a_planted_three_field_refusal_is_never_read_as_a_result(repo_copy: Path) -> None:
    run = _unfinished(repo_copy)
    run.refusal("fake-c").write_text(json.dumps(PLANTED), encoding="utf-8")
    resumed = _reproduce()
    assert resumed.exit_code == 2 and not run.is_bundled
    assert _errors(resumed) == [
        f"Error: {run.refusal('fake-c').relative_to(repo_copy)}: refusal_version 1, expected 2 (written by "
        "an older capsule: it holds no evidence); remove it, or rerun with --retry-refused to ask the "
        "backend again"
    ]
    assert run.refusal("fake-c").read_text(encoding="utf-8") == json.dumps(PLANTED)  # nothing lost


def _forged_record(run: RunDir, arm: str, **changes: object) -> dict[str, object]:
    """A record as complete as a forger can write from what the run holds, for `arm`'s own settings."""
    genuine = json.loads(run.refusal("fake-no").read_text(encoding="utf-8"))
    own = run.generations_meta(arm)
    source = own if own.exists() else run.generations_meta("fake-a")
    settings = json.loads(source.read_text(encoding="utf-8"))["arm"]
    settings |= {"name": arm}
    if arm == "fake-c":
        settings["backend_options"] = {"crash": "later arm"}
    record = genuine | {"arm": settings, "arm_sha256": sha256_json(settings)} | changes
    run.refusal_log(arm).write_bytes(run.refusal_log("fake-no").read_bytes())
    run.refusal(arm).write_text(json.dumps(record), encoding="utf-8")
    return record


@pytest.mark.parametrize(
    ("arm", "words"),
    [
        ("fake-c", "the refusal answers backend_options.refuse matching '.*', which the arm does not ask"),
        ("fake-b", "the same arm has rows or a sidecar beside it"),
    ],
)
def test_a_well_formed_forged_refusal_is_refused_by_the_resume(repo_copy: Path, arm: str, words: str) -> None:
    run = _unfinished(repo_copy, 'refuse = "no kernel"')
    _forged_record(run, arm)
    resumed = _reproduce()
    assert resumed.exit_code == 2 and not run.is_bundled
    (line,) = _errors(resumed)
    where = run.refusal(arm).relative_to(repo_copy)
    assert line.startswith(f"Error: {where}: not this run's refusal of arm {arm!r} ({words}")


def _signed_with_refusal(root: Path) -> RunDir:
    assert CliRunner().invoke(cli, ["keygen"]).exit_code == 0
    body = fake_arm("fake-a") + fake_arm("fake-no", 'refuse = "no kernel"', batch=2) + fake_verdict("fake-a")
    write_and_seal_fake_plan(root, body)
    made = _reproduce()
    assert made.exit_code == 0, made.stderr
    run = _run(root)
    assert invoke("verify", str(run.path)).exit_code == 0
    return run


def _resign_and_verify(root: Path, run: RunDir) -> Result:
    """The owner's key signs the run as it now stands (as a rerun would); then verify."""
    signer, _ = load_signing_key()
    sign_again(run.path, key=signer, ledger=Ledger.load(root / "prereg" / "ledger.jsonl"))
    return invoke("verify", str(run.path))


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        ("plant-beside-rows", "refusal_version 1, expected 2"),
        ("drop-log", "its start-up log (.refused.log) is missing"),
        ("rewrite-message", "its message does not match the declared pattern"),
        ("other-run", "it was written for run 'another-run'"),
    ],
)
def test_verify_refuses_a_refusal_that_is_not_this_runs(repo_copy: Path, forge: str, words: str) -> None:
    run = _signed_with_refusal(repo_copy)
    record = json.loads(run.refusal("fake-no").read_text(encoding="utf-8"))
    if forge == "plant-beside-rows":
        run.refusal("fake-a").write_text(json.dumps(PLANTED), encoding="utf-8")
    elif forge == "drop-log":
        run.refusal_log("fake-no").unlink()
    else:
        changed = {"message": "out of memory"} if forge == "rewrite-message" else {"run_id": "another-run"}
        run.refusal("fake-no").write_text(json.dumps(record | changed), encoding="utf-8")
    result = _resign_and_verify(repo_copy, run)
    assert result.exit_code == 3, result.output
    assert "not this run's refusal" in result.stderr or "refusal_version" in result.stderr
    assert words in result.stderr, result.stderr


def _rewrite_sidecars(run: Path, change: str) -> None:
    for path in sorted((run / "generations").glob("*.meta.json")):
        sidecar = json.loads(path.read_text(encoding="utf-8"))
        if change == "drop-digest":
            del sidecar["manifest_digest"]
        else:
            sidecar["lane"], sidecar["device"] = 1, "cuda:7"
            for segment in sidecar["segments"]:
                segment["lane"], segment["device"] = 1, "cuda:7"
        path.write_text(json.dumps(sidecar, indent=2), encoding="utf-8")
        if change == "drop-digest":
            return  # one arm is enough


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("drop-digest", "field 'manifest_digest' is missing or not a string"),
        ("cuda-7", "device 'cuda:7' is not one of this run's machine (0 GPU(s) in its manifest)"),
    ],
)
def test_a_sidecar_with_a_field_removed_or_rewritten_is_refused(repo: Path, change: str, words: str) -> None:  # noqa: F811
    run = repo / RUN
    _rewrite_sidecars(run, change)
    sign_again(run, key=generate_signer(), ledger=Ledger.load(repo / "prereg" / "ledger.jsonl"))
    result = invoke("verify", RUN, "--key", str(run / PUBLIC_KEY))  # even with the signing key pinned
    assert result.exit_code == 3 and words in result.stderr, result.stderr

"""The forgeries of issue 18, performed on a temporary git repository holding a copy of this checkout's
prereg/ and results/ (committed: the anchor), each asserted refused:

(a) a response and its score changed in the reference run, the run signed again with a new key through
    the library's own bundle code, the ledger's bundle entry rewritten to match (chain recomputed):
    `capsule verify` refuses the untrusted key by name, `capsule prereg verify` fails against the
    anchor; the same forgery appended as a new bundle entry instead (the anchor holds) is still
    refused by the trust check;
(b) a rewritten ledger (an anchored entry edited, the chain recomputed) and a truncated one;
(c) the reference run's bundle copied onto another run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ledger_rewrite import commit_all, git, read_entries, write_rechained
from reference_runs import V2_RUN

from capsule.cli import cli
from capsule.evidence.signing import SigningKey, fingerprint_of, generate_signer
from capsule.hashing import sha256_file
from capsule.pipeline.resign import sign_again
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import AmendEntry, BundleEntry, Entry, ImportEntry
from capsule.prereg.signers import add_signers
from capsule.run_dir import BUNDLE, ENVELOPE, PUBLIC_KEY

REPO = Path(__file__).resolve().parents[2]
RUN = V2_RUN.relative_to(REPO).as_posix()
ARM = "primary"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp git repository with prereg/ and results/ copied and committed; cwd is its root."""
    root = tmp_path / "repo"
    for part in ("prereg", "results"):
        shutil.copytree(REPO / part, root / part)
    commit_all(root, "the published state")
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CAPSULE_SIGNING_KEY", raising=False)
    assert invoke("verify", RUN).exit_code == 0, invoke("verify", RUN).output
    assert invoke("prereg", "verify").exit_code == 0
    return root


def change_a_response_and_its_score(run: Path) -> int:
    """Flip the first failed prompt of the primary arm to a pass, in its generation and its score."""
    scores = run / "scores" / f"{ARM}.jsonl"
    rows = [json.loads(line) for line in scores.read_text(encoding="utf-8").split("\n") if line]
    target = next(row for row in rows if not row["strict"]["prompt"])
    for reading in ("strict", "loose"):
        target[reading] = {"instructions": [True] * len(target["instruction_id_list"]), "prompt": True}
    scores.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    generations = run / "generations" / f"{ARM}.jsonl"
    lines = generations.read_text(encoding="utf-8").split("\n")
    for index, line in enumerate(lines):
        if line and json.loads(line)["key"] == target["key"]:
            row = json.loads(line)
            row["response"] = row["raw"] = "A forged, perfectly compliant answer."
            lines[index] = json.dumps(row)
    generations.write_text("\n".join(lines), encoding="utf-8")
    return int(target["key"])


def test_a_forged_run_with_a_rewritten_bundle_entry_is_refused(repo: Path) -> None:
    """The forger replaces the run's bundle entry in place: the ledger is cut back to the entry before
    it, the changed run is signed with a new key through the library (which appends a fresh bundle
    entry), and the entries that followed are put back, the chain recomputed throughout."""
    run, ledger = repo / RUN, repo / "prereg" / "ledger.jsonl"
    change_a_response_and_its_score(run)
    entries = read_entries(ledger)
    last_bundle = max(i for i, e in enumerate(entries) if e["kind"] == "bundle" and e["run_id"] == run.name)
    write_rechained(ledger, entries[:last_bundle])
    result = sign_again(run, key=generate_signer(), ledger=Ledger.load(ledger))
    write_rechained(ledger, read_entries(ledger) + entries[last_bundle + 1 :])
    Ledger.load(ledger).verify()  # the forged chain is internally valid: the chain alone is fooled
    verified = invoke("verify", RUN)
    assert verified.exit_code == 3, verified.output
    assert (
        f"signed by key {result.fingerprint}, which is not trusted for plan prereg/smollm2-135m-v2"
        in verified.stderr
    )
    chain = invoke("prereg", "verify")
    assert chain.exit_code == 3
    assert f"seq {last_bundle + 1}: differs from the ledger at git HEAD" in chain.stderr


def test_a_forged_run_appended_as_a_new_bundle_entry_is_refused(repo: Path) -> None:
    """The forger leaves history alone and appends, as `report --resign` would: the anchor holds (the
    ledger only grew), and the signature is by a key the plan does not trust."""
    run = repo / RUN
    change_a_response_and_its_score(run)
    key = generate_signer()
    sign_again(run, key=key, ledger=Ledger.load(repo / "prereg" / "ledger.jsonl"))
    assert invoke("prereg", "verify").exit_code == 0
    verified = invoke("verify", RUN)
    assert verified.exit_code == 3 and "which is not trusted for plan" in verified.stderr


def test_a_rewritten_ledger_fails_against_the_anchor(repo: Path) -> None:
    ledger = repo / "prereg" / "ledger.jsonl"
    entries = read_entries(ledger)
    amend = next(i for i, e in enumerate(entries) if e["kind"] == "amend")
    entries[amend]["note"] = entries[amend]["note"].replace("45 minutes", "30 minutes")
    write_rechained(ledger, entries)
    Ledger.load(ledger).verify()
    result = invoke("prereg", "verify")
    assert result.exit_code == 3 and f"seq {amend + 1}: differs from the ledger at git HEAD" in result.stderr


def test_a_truncated_ledger_fails_against_the_anchor(repo: Path) -> None:
    """A committed trailing entry deleted (here a signers entry, which no other check misses)."""
    ledger = repo / "prereg" / "ledger.jsonl"
    add_signers(Path("prereg/smoke"), ["ef" * 32], "a key to lose", ledger)
    commit_all(repo, "one more key")
    lines = ledger.read_bytes().split(b"\n")[:-1]
    ledger.write_bytes(b"".join(line + b"\n" for line in lines[:-1]))
    Ledger.load(ledger).verify()
    result = invoke("prereg", "verify")
    assert result.exit_code == 3 and f"seq {len(lines)}: in the ledger at git HEAD (commit " in result.stderr
    assert "missing now (the ledger was truncated" in result.stderr


def test_a_bundle_copied_onto_another_run_is_refused(repo: Path) -> None:
    """Another run (the reference run's files with one answer and score changed, under another id)
    given the reference run's bundle: the signature verifies, but the files are not what it signed."""
    other = repo / "results" / "smollm2-135m" / "20261201T000000Z-00000000"
    shutil.copytree(repo / RUN, other)
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):
        (other / name).unlink()
    change_a_response_and_its_score(other)
    for name in (BUNDLE, ENVELOPE, PUBLIC_KEY):
        shutil.copy(repo / RUN / name, other / name)
    result = invoke("verify", str(other.relative_to(repo)))
    assert result.exit_code == 3
    assert f"Error: generations/{ARM}.jsonl: " in result.stderr and "in the bundle" in result.stderr


# ---- issue 26, finding 5: forgeries that passed every checker ------------------------------------

V2_PLAN = "prereg/smollm2-135m-v2/plan.toml"
SMOKE_PLAN = "prereg/smoke/plan.toml"



def flip_headline_and_resign(repo: Path, key: SigningKey) -> None:
    """5a's forgery: a response and its score flipped, the run signed again with `key` (a bundle entry
    appended through the library's own code)."""
    run = repo / RUN
    change_a_response_and_its_score(run)
    sign_again(run, key=key, ledger=Ledger.load(repo / "prereg" / "ledger.jsonl"))


def refused_by_every_checker(repo: Path, words: str) -> None:
    """verify, report --check and check-numbers refuse the run (exit 3) naming `words`."""
    for args in (("verify", RUN), ("report", RUN, "--check"), ("check-numbers", f"{RUN}/RESULTS.md")):
        result = invoke(*args)
        assert result.exit_code == 3, (args, result.output)
        assert words in result.stderr, (args, result.stderr)


@pytest.mark.parametrize("committed", [False, True])
def test_5a_a_signer_added_now_cannot_sign_a_run_made_before(repo: Path, committed: bool) -> None:
    """`prereg signers --add MY_KEY`, then the reference run re-signed with a flipped answer: the key
    was trusted only after the run started, so no checker accepts it, committed or not."""
    key = generate_signer()
    added = invoke("prereg", "signers", "prereg/smollm2-135m-v2", "--add", fingerprint_of(key.public_key),
                   "--reason", "my key")
    assert added.exit_code == 0, added.output
    flip_headline_and_resign(repo, key)
    if committed:
        commit_all(repo, "the forged run")
    assert invoke("prereg", "verify").exit_code == 0  # the chain only grew: the ledger alone is fooled
    refused_by_every_checker(repo, "only after the run started")


@pytest.mark.parametrize("committed", [False, True])
def test_5h_a_back_dated_start_head_buys_a_later_key_nothing(repo: Path, committed: bool) -> None:
    """Round three's first forgery: the forger's key added by `prereg signers`, the run's start head
    (run.json and bundle.json) moved to that signers entry, the headline flipped and the run signed
    again. The start is the ledger's word, not the run's: a run with no `start` entry started before
    every signers entry, so every checker refuses it, committed or not (it passed on 8f9ed09)."""
    key = generate_signer()
    added = invoke("prereg", "signers", "prereg/smollm2-135m-v2", "--add", fingerprint_of(key.public_key),
                   "--reason", "my key")
    assert added.exit_code == 0, added.output
    ledger = repo / "prereg" / "ledger.jsonl"
    signers_head = Ledger.load(ledger).head()
    for name, field in (("bundle.json", None), ("run.json", "ledger_head_at_start")):
        path = repo / RUN / name
        record = json.loads(path.read_text(encoding="utf-8"))
        if field is None:
            record["ledger_heads"]["at_start"] = signers_head
        else:
            record[field] = signers_head
        path.write_text(json.dumps(record), encoding="utf-8")
    flip_headline_and_resign(repo, key)
    if committed:
        commit_all(repo, "the back-dated forgery")
    refused_by_every_checker(repo, "only after the run started")


def test_5b_history_rewritten_and_committed_departs_from_the_published_ledger(
    repo: Path, tmp_path: Path
) -> None:
    """The forger's key trusted by a signers entry inserted before the run's start, the chain
    recomputed, the run re-signed, all committed: HEAD agrees, the remote-tracking branch does not,
    nor does a head pinned in CAPSULE_LEDGER_ANCHOR."""
    published = tmp_path / "published.git"
    git(repo, "clone", "-q", "--bare", str(repo), str(published))
    git(repo, "remote", "add", "origin", str(published))
    git(repo, "fetch", "-q", "origin")
    git(repo, "branch", "-q", "--set-upstream-to", f"origin/{git(repo, 'branch', '--show-current')}")
    ledger = repo / "prereg" / "ledger.jsonl"
    pinned = Ledger.load(ledger).head()
    key = generate_signer()
    entries = read_entries(ledger)
    run_bundle = min(i for i, e in enumerate(entries) if e.get("run_id") == (repo / RUN).name)
    trusting = next(e for e in entries if e["kind"] == "signers" and e["path"] == V2_PLAN)
    forged = {**trusting, "fingerprints": [fingerprint_of(key.public_key)], "note": "a key"}
    write_rechained(ledger, [*entries[:run_bundle], forged, *entries[run_bundle:]])
    bundle = json.loads((repo / RUN / BUNDLE).read_text(encoding="utf-8"))
    bundle["ledger_heads"]["at_start"] = read_entries(ledger)[run_bundle]["hash"]  # after the forged trust
    (repo / RUN / BUNDLE).write_text(json.dumps(bundle), encoding="utf-8")
    flip_headline_and_resign(repo, key)
    commit_all(repo, "history rewritten")
    verified = invoke("verify", RUN)  # the trust rule refuses it first: its start is the run's own word
    assert verified.exit_code == 3 and "only after the run started" in verified.stderr
    result = invoke("prereg", "verify")
    assert result.exit_code == 3 and "differs from the published ledger at origin/" in result.stderr
    git(repo, "branch", "-q", "--unset-upstream")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAPSULE_LEDGER_ANCHOR", pinned)
        pin = invoke("prereg", "verify")
        pinned_verify = invoke("verify", RUN)
    assert pin.exit_code == 3 and f"no entry has the anchor head hash {pinned}" in pin.stderr
    assert pinned_verify.exit_code == 3 and "only after the run started" in pinned_verify.stderr
    # once the gap prereg/README.md names (neither a remote nor a pinned head: HEAD is all there is);
    # closed since runs' starts are ledger entries: a back-dated start head buys a later key nothing
    closed = invoke("verify", RUN)
    assert closed.exit_code == 3 and "only after the run started" in closed.stderr


def test_5c_a_manifest_changed_and_signed_again_is_refused(repo: Path) -> None:
    """manifest.json claims an H200; the run is signed again (by its own trusted key, with the facts of
    its bundle): the signed manifest_digest is not the manifest's."""
    run = repo / RUN
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    manifest["gpus"] = [{"name": "NVIDIA H200", "memory_total_mib": 143771}]
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    sign_again(run, key=generate_signer(), ledger=Ledger.load(repo / "prereg" / "ledger.jsonl"))
    result = invoke("verify", RUN, "--key", str(run / PUBLIC_KEY))  # even with the signing key pinned
    assert result.exit_code == 3 and "is not the bundle's manifest_digest" in result.stderr


def test_5d_compare_and_check_numbers_apply_the_trust_rule_to_unrecorded_runs(repo: Path) -> None:
    """A copy of the reference run under a new id, changed, signed by a stranger and not in the ledger:
    compare (and check-numbers of a comparison region) refuse its key, as verify does."""
    other = repo / "results" / "smollm2-135m" / "20261201T000000Z-00000000"
    shutil.copytree(repo / RUN, other)
    change_a_response_and_its_score(other)
    bundle = json.loads((other / BUNDLE).read_text(encoding="utf-8"))
    bundle["run_id"] = other.name
    (other / BUNDLE).write_text(json.dumps(bundle), encoding="utf-8")
    sign_again(other, key=generate_signer(), ledger=None)
    result = invoke("compare", RUN, str(other.relative_to(repo)))
    assert result.exit_code == 3 and "which is not trusted for plan" in result.stderr
    written = invoke("compare", RUN, str(other.relative_to(repo)), "--out", "cmp.md")
    assert written.exit_code == 3 and not Path("cmp.md").exists()


@pytest.mark.parametrize("kind", ["bundle", "import", "amend"])
def test_5e_a_sealed_plan_is_never_re_recorded_but_by_an_amend_of_another_path(repo: Path, kind: str) -> None:
    """The sealed plan edited, then re-recorded by an appended bundle, import or self-amend entry."""
    plan = repo / V2_PLAN
    latest = Ledger.load(repo / "prereg" / "ledger.jsonl").latest_for(V2_PLAN)
    assert latest is not None
    plan.write_bytes(plan.read_bytes() + b"# edited after sealing\n")
    base = {"path": V2_PLAN, "sha256": sha256_file(plan), "note": "re-record"}
    entry: Entry = {
        "bundle": lambda: BundleEntry(**base, run_id="x"),
        "import": lambda: ImportEntry(**base, run_id="x", key_fingerprint="ab" * 32, foreign_entry="cd" * 32,
                                      foreign_seq=1, foreign_start_seq=1, seal=latest.hash),
        "amend": lambda: AmendEntry(**base, of=V2_PLAN, of_sha256=latest.sha256),
    }[kind]()
    Ledger.load(repo / "prereg" / "ledger.jsonl").append(entry)
    result = invoke("prereg", "verify")
    assert result.exit_code == 3
    assert "re-recorded only by an amend of another path" in result.stderr, result.stderr


def test_5f_a_dry_run_is_never_imported(repo: Path, tmp_path: Path) -> None:
    """A fake-backend dry run of the superseded smoke plan, made on a ledger forked before its
    amendment and signed there by a key both ledgers trust for it: import refuses it as a dry run."""
    fork = tmp_path / "fork"
    shutil.copytree(repo / "prereg", fork / "prereg")
    fork_ledger = fork / "prereg" / "ledger.jsonl"
    entries = read_entries(fork_ledger)
    cut = next(i for i, e in enumerate(entries) if e["kind"] == "amend" and e["of"] == SMOKE_PLAN)
    write_rechained(fork_ledger, [e for e in entries[:cut] if e["kind"] != "bundle"])
    key = generate_signer()
    for root, ledger in ((fork, fork_ledger), (repo, repo / "prereg" / "ledger.jsonl")):
        add_signers(root / "prereg" / "smoke", [fingerprint_of(key.public_key)], "a key", ledger)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(fork)
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path / "fork-config"))
        made = invoke("reproduce", "--no-progress", "--plan", "prereg/smoke", "--dry-run")
    assert made.exit_code == 0, made.output
    (dry,) = (fork / "runs" / "dry-run").glob("*/*")
    sign_again(dry, key=key, ledger=Ledger.load(fork_ledger))
    target = repo / "results" / "smoke" / dry.name
    shutil.copytree(dry, target)
    before = (repo / "prereg" / "ledger.jsonl").read_bytes()
    result = invoke("import", str(target.relative_to(repo)), "--ledger", str(fork_ledger))
    assert result.exit_code == 2 and "a dry run (random tokens) is never evidence" in result.stderr
    assert (repo / "prereg" / "ledger.jsonl").read_bytes() == before


def test_5g_text_from_entries_is_printed_escaped(repo: Path) -> None:
    """The signers note that trusts the v2 run's key rewritten with a CR and ANSI escapes (committed,
    so the anchor agrees): verify's line prints it escaped, never raw."""
    ledger = repo / "prereg" / "ledger.jsonl"
    entries = read_entries(ledger)
    trusting = next(e for e in entries if e["kind"] == "signers" and e["path"] == V2_PLAN)
    trusting["note"] = "ok\r\x1b[2K\x1b[32mverified by the authors\x1b[0m"
    write_rechained(ledger, entries)
    commit_all(repo, "a note that rewrites the terminal line")
    result = invoke("verify", RUN)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\r" not in result.output
    assert "ok\\r\\x1b[2K\\x1b[32mverified by the authors" in result.output

"""`verify_run`: every single-byte change, key swap, missing/extra/renamed file and forged order fails."""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import pytest
from test_bundle import PLAN_BYTES, PLAN_PATH, Study, build_study, manifest_digest_of, sidecar_bytes

from capsule.errors import VerificationError
from capsule.evidence import signed_files as verify_module  # where a run's files are hashed
from capsule.evidence.bundle import make_bundle
from capsule.evidence.signing import generate_keypair, generate_signer
from capsule.evidence.verify import verify_run
from capsule.hashing import sha256_bytes
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import AmendEntry
from capsule.run_dir import BUNDLE, ENVELOPE, PUBLIC_KEY


@pytest.fixture
def study(tmp_path: Path) -> Study:
    """One bundled run with its own ledger under tmp_path."""
    return build_study(tmp_path)


def _verify(study: Study, pubkey: Path | None = None) -> None:
    verify_run(study.run_dir, pubkey=pubkey, ledger_path=study.ledger_path)


def _rewrite_index(study: Study, edit) -> None:  # type: ignore[no-untyped-def]
    path = study.run_dir / BUNDLE
    bundle = json.loads(path.read_text())
    edit(bundle)
    path.write_text(json.dumps(bundle, indent=2))


def test_good_bundle_verifies_with_summary(study: Study) -> None:
    summary = verify_run(study.run_dir, pubkey=None, ledger_path=study.ledger_path)
    assert summary.run_id == "run-1" and summary.n_files == study.result.n_files
    assert summary.fingerprint == study.result.fingerprint
    assert "included key" in summary.key_source
    line = summary.line()
    assert "\n" not in line and line.startswith("OK run run-1") and PLAN_PATH in line


def test_good_bundle_verifies_with_given_key(study: Study, tmp_path: Path) -> None:
    summary = verify_run(study.run_dir, pubkey=study.run_dir / PUBLIC_KEY, ledger_path=study.ledger_path)
    assert summary.key_source.startswith("given key")


BUNDLE_OUTPUT_SAMPLE = 1500  # seeded byte positions in bundle.json / bundle.dsse.json / bundle.pub.pem


def test_every_single_byte_change_fails(study: Study) -> None:
    """Every byte of every run file, and a seeded sample of the bundle outputs' bytes, changed by a
    seeded non-zero XOR mask: each change must make the real `verify_run` fail.

    (All bytes of all files with three masks each, 19,350 changes, were checked once by hand in
    about 60 s; the sample keeps this test near 7 s on a shared 2-core machine.)
    """
    rng = random.Random(20240611)
    files = sorted(p for p in study.run_dir.rglob("*") if p.is_file())
    outputs = [p for p in files if p.name in {BUNDLE, ENVELOPE, PUBLIC_KEY}]
    positions = [(p, offset) for p in files if p not in outputs for offset in range(p.stat().st_size)]
    run_file_flips = len(positions)
    everywhere = [(p, offset) for p in outputs for offset in range(p.stat().st_size)]
    positions += rng.sample(everywhere, BUNDLE_OUTPUT_SAMPLE)
    started = time.perf_counter()
    for path, offset in positions:
        original = path.read_bytes()
        tampered = bytearray(original)
        tampered[offset] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(tampered))
        try:
            with pytest.raises(VerificationError):
                _verify(study)
        finally:
            path.write_bytes(original)
    _verify(study)  # restored: verifies again
    assert len(positions) >= 2000 and run_file_flips > 500
    assert {p for p, _ in positions} == set(files)
    elapsed = time.perf_counter() - started
    print(f"{len(positions)} flips ({run_file_flips} exhaustive over run files) in {elapsed:.1f} s")


def test_wrong_key_fails(study: Study, tmp_path: Path) -> None:
    _, other_public, other_fingerprint = generate_keypair(tmp_path / "other")
    with pytest.raises(VerificationError, match="no signature by key " + other_fingerprint):
        _verify(study, pubkey=other_public)


def _resign_with_attacker_key(study: Study) -> str:
    (study.run_dir / "RESULTS.md").write_text("# Results\n\nprompt-level strict: 2/2\n")
    result = make_bundle(
        study.run_dir, run_id="run-1", plan_path=PLAN_PATH, plan_sha256=sha256_bytes(PLAN_BYTES),
        manifest_digest=manifest_digest_of(study.run_dir), ledger_head_at_start=study.head_at_start,
        key=generate_signer(),
        ledger=None,
    )
    return result.fingerprint


def test_resigned_with_another_key_fails_in_place(study: Study) -> None:
    """An attacker re-bundles edited results with their own key: the ledger's record of the envelope
    no longer matches (the ledger itself re-hashes recorded files that are in place), pinned or not."""
    _resign_with_attacker_key(study)
    for pubkey in (None, study.run_dir / PUBLIC_KEY):
        with pytest.raises(VerificationError, match="bundle.dsse.json"):
            _verify(study, pubkey=pubkey)


def test_resigned_copy_elsewhere_fails_on_the_bundle_entry(study: Study, tmp_path: Path) -> None:
    """The same forgery on a copy of the run (verified offline, away from its recorded path): refused
    for its untrusted key; pinned (the trust check passed by), for the ledger's bundle entry."""
    copy = tmp_path / "downloaded" / "run-1"
    shutil.copytree(study.run_dir, copy)
    study.run_dir = copy
    fingerprint = _resign_with_attacker_key(study)
    with pytest.raises(VerificationError, match=f"signed by key {fingerprint}, which is not trusted"):
        _verify(study)
    with pytest.raises(VerificationError, match="bundle.dsse.json has sha256 .*; ledger has [0-9a-f]{64}"):
        _verify(study, pubkey=copy / PUBLIC_KEY)


@pytest.mark.parametrize("where", ["sidecar", "segment", "none"])
def test_an_arm_generated_on_another_machine_fails(study: Study, where: str) -> None:
    """An arm whose sidecar names another machine fingerprint than the run's manifest (copied in from
    another run before signing) is refused, though its signature and every file's hash hold; a
    sidecar naming this run's fingerprint throughout verifies."""
    digest, other = manifest_digest_of(study.run_dir), "f" * 64
    top, second = (other, digest) if where == "sidecar" else (digest, other if where == "segment" else digest)
    (study.run_dir / "generations" / "greedy.meta.json").write_bytes(sidecar_bytes(top, digest, second))
    make_bundle(
        study.run_dir, run_id="run-1", plan_path=PLAN_PATH, plan_sha256=sha256_bytes(PLAN_BYTES),
        manifest_digest=digest, ledger_head_at_start=study.head_at_start, key=study.key, ledger=None,
    )
    if where == "none":
        verify_run(study.run_dir, pubkey=study.run_dir / PUBLIC_KEY, ledger_path=None)
        return
    with pytest.raises(VerificationError, match=(
        rf"^generations/greedy.meta.json: generated on machine fingerprint {other}, not this run's {digest}"
    )):
        verify_run(study.run_dir, pubkey=study.run_dir / PUBLIC_KEY, ledger_path=None)


def test_copied_run_verifies_offline(study: Study, tmp_path: Path) -> None:
    copy = tmp_path / "downloaded" / "run-1"
    shutil.copytree(study.run_dir, copy)
    assert verify_run(copy, pubkey=None, ledger_path=study.ledger_path).run_id == "run-1"


def test_missing_file_fails(study: Study) -> None:
    (study.run_dir / "scores" / "greedy.jsonl").unlink()
    with pytest.raises(VerificationError, match=r"missing \['scores/greedy.jsonl'\], extra none"):
        _verify(study)


def test_extra_file_fails(study: Study) -> None:
    (study.run_dir / "plots" / "extra.png").write_bytes(b"x")
    with pytest.raises(VerificationError, match=r"missing none, extra \['plots/extra.png'\]"):
        _verify(study)


def test_renamed_file_fails(study: Study) -> None:
    (study.run_dir / "analysis.json").rename(study.run_dir / "analysis2.json")
    with pytest.raises(VerificationError, match=r"missing \['analysis.json'\], extra \['analysis2.json'\]"):
        _verify(study)


def test_missing_bundle_output_fails(study: Study) -> None:
    (study.run_dir / PUBLIC_KEY).unlink()
    with pytest.raises(VerificationError, match=PUBLIC_KEY):
        _verify(study)


def _record_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Replace the verifier's file hashing with a recorder: which listed files were read."""
    read: list[Path] = []

    def record(path: Path) -> str:
        read.append(path)
        return "0" * 64

    monkeypatch.setattr(verify_module, "sha256_file", record)
    return read


@pytest.mark.parametrize("bad_path", ["../outside.txt", "plots/../../outside.txt", "/etc/hostname",
                                      "C:/x", "a\\..\\b", "./RESULTS.md", "plots//a.png", ""])
def test_escaping_paths_rejected_before_any_file_is_read(
    study: Study, bad_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (study.run_dir.parent / "outside.txt").write_text("secret")
    listed = {"path": bad_path, "sha256": "0" * 64, "size": 6}
    _rewrite_index(study, lambda bundle: bundle["files"].append(listed))
    read = _record_reads(monkeypatch)
    with pytest.raises(VerificationError, match="escapes|not a non-empty string"):
        _verify(study)
    assert read == []


@pytest.mark.parametrize("target", ["file", "directory"])
def test_symlinks_rejected_before_any_file_is_read(
    study: Study, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = study.run_dir.parent / "outside"
    if target == "file":
        victim = study.run_dir / "RESULTS.md"
        shutil.copyfile(victim, outside)
    else:
        victim = study.run_dir / "plots"
        shutil.copytree(victim, outside)
        shutil.rmtree(victim)
    victim.unlink(missing_ok=True)
    victim.symlink_to(outside)
    read = _record_reads(monkeypatch)
    with pytest.raises(VerificationError, match="symlink"):
        _verify(study)
    assert read == []


def test_plan_sealed_after_run_start_fails(tmp_path: Path) -> None:
    """The key pinned (a key trusted only after the start is refused before this: see test_forgery)."""
    forged = build_study(tmp_path, seal_after_start=True)
    with pytest.raises(VerificationError, match="not sealed before the run started"):
        _verify(forged, pubkey=forged.run_dir / PUBLIC_KEY)


def _rebundle(study: Study, plan_sha256: str) -> None:
    make_bundle(study.run_dir, run_id="run-1", plan_path=PLAN_PATH, plan_sha256=plan_sha256,
                manifest_digest=manifest_digest_of(study.run_dir), ledger_head_at_start=study.head_at_start,
                key=study.key,
                ledger=Ledger.load(study.ledger_path))


def test_run_of_unsealed_plan_bytes_fails(study: Study) -> None:
    edited = PLAN_BYTES + b"temperature = 0.7\n"
    (study.run_dir / "plan.toml").write_bytes(edited)
    _rebundle(study, sha256_bytes(edited))
    with pytest.raises(VerificationError, match="the run used sha256 " + sha256_bytes(edited)):
        _verify(study)


AMENDED_PATH = "prereg/demo/amended/plan.toml"


def _amend(study: Study) -> None:
    Ledger.load(study.ledger_path).append(AmendEntry(
        path=AMENDED_PATH, sha256=sha256_bytes(b"amended"), note="raise max tokens", of=PLAN_PATH,
        of_sha256=sha256_bytes(PLAN_BYTES),
    ))


def test_plan_amended_after_the_run_started_still_verifies(study: Study) -> None:
    _amend(study)
    _rebundle(study, sha256_bytes(PLAN_BYTES))
    assert verify_run(study.run_dir, pubkey=None, ledger_path=study.ledger_path).plan_path == PLAN_PATH


def test_plan_superseded_before_the_run_started_fails(study: Study) -> None:
    _amend(study)
    study.head_at_start = Ledger.load(study.ledger_path).head()
    _rebundle(study, sha256_bytes(PLAN_BYTES))
    with pytest.raises(VerificationError, match="superseded by " + AMENDED_PATH):
        _verify(study)


def test_no_bundle_entry_fails(tmp_path: Path) -> None:
    study = build_study(tmp_path)
    lines = study.ledger_path.read_text().splitlines(keepends=True)
    study.ledger_path.write_text("".join(lines[:-1]))  # a valid chain without the bundle entry
    with pytest.raises(VerificationError, match="no bundle entry"):
        _verify(study)


def test_tampered_ledger_fails(study: Study) -> None:
    text = study.ledger_path.read_text()
    study.ledger_path.write_text(text.replace("an earlier study", "an earlier Study"))
    with pytest.raises(VerificationError):
        _verify(study)


def test_missing_ledger_fails(study: Study, tmp_path: Path) -> None:
    with pytest.raises(VerificationError, match="not found"):
        verify_run(study.run_dir, pubkey=None, ledger_path=tmp_path / "nope.jsonl")

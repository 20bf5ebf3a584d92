"""Bundles: a small run directory and a temporary ledger in tmp_path, digested, signed and recorded.

`build_study` is shared with test_verify*.py and test_keygen*.py (imported by module name).
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from capsule.errors import BadInputError
from capsule.evidence.bundle import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    BundleResult,
    make_bundle,
)
from capsule.evidence.signing import (
    PAYLOAD_TYPE,
    SigningKey,
    fingerprint_of,
    generate_signer,
    verify_envelope,
)
from capsule.generation.arm_sidecar import COMPLETE, Segment, Sidecar, encode
from capsule.hashing import sha256_bytes, sha256_file, sha256_json
from capsule.jsonio import dumps_document
from capsule.prereg.ledger import Ledger
from capsule.prereg.ledger_entries import SealEntry, SignersEntry
from capsule.run_dir import BUNDLE, ENVELOPE, PUBLIC_KEY

PLAN_PATH = "prereg/demo/plan.toml"
PLAN_BYTES = b'[study]\nname = "demo"\nseed = 1234\n'


def sidecar_bytes(digest: str, *segment_digests: str) -> bytes:
    """A complete arm's sidecar (`greedy`) whose top names machine `digest` and whose segments name
    `segment_digests`: what verify reads of one (`capsule.evidence.arm_records`)."""
    identity = {"arm": "greedy"}
    return dumps_document(encode(Sidecar(
        arm={"name": "greedy"}, identity=identity, identity_sha256=sha256_json(identity), plan_hash="p",
        started_at="2026-12-01T00:00:00+00:00", manifest_digest=digest, status=COMPLETE,
        segments=tuple(Segment("2026-12-01T00:00:00+00:00", d) for d in segment_digests),
    ))).encode()


@dataclass
class Study:
    """A bundled run: its directory, ledger, key and what make_bundle returned."""

    run_dir: Path
    ledger_path: Path
    key: SigningKey
    result: BundleResult
    head_at_start: str


MANIFEST_BYTES = b'{"schema": 1, "host": {"cores": 2}}\n'
MANIFEST_DIGEST = sha256_json(json.loads(MANIFEST_BYTES))


def write_run_files(run_dir: Path, rng: random.Random, head: str) -> None:
    """A small run directory shaped like `capsule reproduce`'s output (contents from a seeded rng)."""
    plan_sha = sha256_bytes(PLAN_BYTES)
    files: dict[str, bytes] = {
        "run.json": json.dumps({"run_id": "run-1", "plan": PLAN_PATH, "plan_sha256": plan_sha,
                                "ledger_head": head}).encode(),
        "plan.toml": PLAN_BYTES,
        "plan.seal.json": json.dumps({"kind": "seal", "path": PLAN_PATH, "sha256": plan_sha}).encode(),
        "manifest.json": MANIFEST_BYTES,
        "generations/greedy.jsonl": b'{"key": 1, "response": "Hello."}\n{"key": 2, "response": "Hi"}\n',
        "generations/greedy.meta.json": sidecar_bytes(MANIFEST_DIGEST, MANIFEST_DIGEST),
        "generations/sampled.jsonl.gz": gzip.compress(b'{"key": 1, "response": "Yo"}\n', mtime=0),
        "scores/greedy.jsonl": b'{"key": 1, "strict": {"prompt": true}}\n',
        "analysis.json": b'{"comparisons": []}\n',
        "RESULTS.md": b"# Results\n\nprompt-level strict: 1/2\n",
        "plots/accuracy.png": b"\x89PNG\r\n\x1a\n" + rng.randbytes(40),
    }
    for relative, data in files.items():
        path = run_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def manifest_digest_of(run_dir: Path) -> str:
    """The digest `capsule verify` checks the bundle's manifest_digest against (canonical JSON)."""
    return sha256_json(json.loads((run_dir / "manifest.json").read_bytes()))


def build_study(
    tmp_path: Path, *, seal_after_start: bool = False, seed: int = 0, trusted: bool = True
) -> Study:
    """Seal a plan in a tmp ledger, write a run directory, bundle it and record the bundle entry.

    With `seal_after_start`, the run's recorded start head precedes the plan's seal (a forged order).
    With `trusted` (the default) a `signers` entry trusts the run's key for the plan, as
    `capsule prereg signers` would append it; without, only `--key` accepts the run.
    """
    ledger_path = tmp_path / "prereg" / "ledger.jsonl"
    ledger = Ledger.load(ledger_path)
    other = SealEntry(path="prereg/other/plan.toml", sha256=sha256_bytes(b"other"), note="an earlier study")
    ledger.append(other)
    key = generate_signer()

    def trust() -> None:  # the key is trusted before the run starts: a later signers entry would not do
        if trusted:
            ledger.append(SignersEntry(path=PLAN_PATH, sha256=sha256_bytes(PLAN_BYTES), note="the demo key",
                                       fingerprints=[fingerprint_of(key.public_key)]))

    sealed_demo_plan = SealEntry(path=PLAN_PATH, sha256=sha256_bytes(PLAN_BYTES), note="sealed demo plan",
                                 companions={})
    if seal_after_start:
        head = ledger.head()
        ledger.append(sealed_demo_plan)
        trust()
    else:
        ledger.append(sealed_demo_plan)
        trust()
        head = ledger.record_start(PLAN_PATH, sha256_bytes(PLAN_BYTES), "run-1")  # as reproduce opens it
    run_dir = tmp_path / "results" / "demo" / "run-1"
    write_run_files(run_dir, random.Random(seed), head)
    result = make_bundle(
        run_dir, run_id="run-1", plan_path=PLAN_PATH, plan_sha256=sha256_bytes(PLAN_BYTES),
        manifest_digest=manifest_digest_of(run_dir),
        ledger_head_at_start=head, key=key,
        ledger=ledger,
    )
    return Study(run_dir, ledger_path, key, result, head)


@pytest.fixture
def study(tmp_path: Path) -> Study:
    """One bundled run with its own ledger under tmp_path."""
    return build_study(tmp_path)


def test_bundle_lists_every_run_file_with_digest_and_size(study: Study) -> None:
    bundle = json.loads(study.result.bundle_path.read_text())
    on_disk = sorted(
        p.relative_to(study.run_dir).as_posix() for p in study.run_dir.rglob("*")
        if p.is_file() and p.name not in {BUNDLE, ENVELOPE, PUBLIC_KEY}
    )
    assert [item["path"] for item in bundle["files"]] == on_disk
    for item in bundle["files"]:
        path = study.run_dir / item["path"]
        assert item["sha256"] == sha256_file(path) and item["size"] == path.stat().st_size
    assert bundle["run_id"] == "run-1"
    assert bundle["ledger_heads"]["at_start"] == study.head_at_start
    assert study.result.n_files == len(on_disk)


def test_envelope_is_a_signed_in_toto_statement(study: Study) -> None:
    envelope = json.loads(study.result.envelope_path.read_text())
    assert envelope["payloadType"] == PAYLOAD_TYPE
    statement = json.loads(verify_envelope(envelope, study.key.public_key, "test"))
    assert statement["_type"] == STATEMENT_TYPE and statement["predicateType"] == PREDICATE_TYPE
    bundle = json.loads(study.result.bundle_path.read_text())
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
        item["path"]: item["sha256"] for item in bundle["files"]
    }
    predicate = statement["predicate"]
    assert predicate["run_id"] == "run-1"
    assert predicate["plan"] == {"path": PLAN_PATH, "sha256": sha256_bytes(PLAN_BYTES)}
    assert predicate["bundle_json_sha256"] == sha256_file(study.result.bundle_path)
    assert predicate["ledger_heads"]["at_start"] == study.head_at_start


def test_public_key_travels_with_the_bundle(study: Study) -> None:
    from capsule.evidence.signing import read_public_key

    included = read_public_key(study.run_dir / PUBLIC_KEY)
    assert fingerprint_of(included) == fingerprint_of(study.key.public_key) == study.result.fingerprint


def test_bundle_entry_is_appended_to_the_ledger(study: Study) -> None:
    ledger = Ledger.load(study.ledger_path)
    ledger.verify()
    entry = ledger.entries[-1]
    assert entry.kind == "bundle" and entry.run_id == "run-1"
    assert entry.sha256 == sha256_file(study.result.envelope_path) == study.result.envelope_sha256
    assert entry.key_fingerprint == study.result.fingerprint
    assert entry == study.result.ledger_entry


def test_bundle_refuses_symlinks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_run_files(run_dir, random.Random(1), "0" * 64)
    (tmp_path / "outside.txt").write_text("secret")
    (run_dir / "link.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(BadInputError, match="symlink"):
        make_bundle(run_dir, run_id="r", plan_path=PLAN_PATH, plan_sha256="0" * 64, manifest_digest="0" * 64,
                    ledger_head_at_start="0" * 64, key=generate_signer(), ledger=None)
    assert not (run_dir / BUNDLE).exists()


def test_rebundling_replaces_previous_outputs_and_ignores_them(study: Study) -> None:
    again = make_bundle(
        study.run_dir, run_id="run-1", plan_path=PLAN_PATH, plan_sha256=sha256_bytes(PLAN_BYTES),
        manifest_digest=manifest_digest_of(study.run_dir), ledger_head_at_start=study.head_at_start,
        key=study.key, ledger=None,
    )
    assert again.n_files == study.result.n_files and again.ledger_entry is None

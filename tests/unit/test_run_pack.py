"""`capsule export RUN --out FILE` and `capsule import FILE`: one file carries a run and the ledger
entries that prove it from one repository root to another; every bad pack is one `Error:` line,
with nothing written under results/ and nothing appended."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from run_pair import as_if_run_for_real, copy_run, dry_run, new_root, sign

import capsule.evidence.pack_reader as pack_reader
from capsule.cli import cli
from capsule.evidence.signing import generate_signer
from capsule.hashing import canonical_json, sha256_file
from capsule.prereg.ledger import Ledger, verify_ledger
from capsule.prereg.ledger_entries import SealEntry

LEDGER = Path("prereg") / "ledger.jsonl"
PLAN_TOML = "prereg/smoke-v2/plan.toml"
Member = tuple[tarfile.TarInfo, bytes | None]


def _local_entry(root: Path, name: str) -> None:
    """Append an entry only this root's ledger has (its own history after the shared seal)."""
    note = root / "prereg" / f"{name}.txt"
    note.write_text(f"{name}\n")
    Ledger.load(root / LEDGER).append(
        SealEntry(path=f"prereg/{name}.txt", sha256=sha256_file(note), note=f"only on {name}")
    )


def _invoke(root: Path, *args: str) -> Result:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        return CliRunner().invoke(cli, list(args))


def _refused(result: Result, code: int, text: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, result.output + result.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: ") and text in lines[0], result.stderr


def _state(root: Path) -> tuple[bytes, list[str]]:
    """The ledger's bytes and every path under results/: what a refused import must leave as it was."""
    results = root / "results"
    return (root / LEDGER).read_bytes(), sorted(str(p.relative_to(root)) for p in results.rglob("*"))


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Another machine's repository root (the same ledger, an entry of its own), and a run signed into
    its ledger as a run made there for real."""
    root = new_root(tmp_path_factory.mktemp("theirs"))
    _local_entry(root, "theirs")
    run = as_if_run_for_real(dry_run(root))
    sign(run, root / LEDGER)
    return root, run


@pytest.fixture(scope="module")
def pack(theirs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`capsule export` of their run, with their ledger (the default --ledger in their root)."""
    root, run = theirs
    out = tmp_path_factory.mktemp("packs") / "run.tar.gz"
    result = _invoke(root, "export", str(run), "--out", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    assert str(out) in result.stdout and f"capsule import {out.name}" in result.stdout
    return out


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository root that refusals are tried against: every test leaves it as it was."""
    root = new_root(tmp_path_factory.mktemp("receiver"))
    _local_entry(root, "ours")
    return root


@pytest.fixture
def ours(tmp_path: Path) -> Path:
    """A fresh receiving root with an entry of its own, for the tests that import."""
    root = new_root(tmp_path / "ours")
    _local_entry(root, "ours")
    return root


def _members(path: Path) -> list[Member]:
    with tarfile.open(path, "r:gz") as tar:
        return [(m, tar.extractfile(m).read() if m.isreg() else None) for m in tar]  # type: ignore[union-attr]


def _write(path: Path, members: list[Member]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _repack(pack: Path, out: Path, edit: Callable[[list[Member]], list[Member]]) -> Path:
    return _write(out, edit(_members(pack)))


def _run_id(pack: Path) -> str:
    return str(json.loads(dict((m.name, d) for m, d in _members(pack))["pack.json"] or b"")["run_id"])


Edit = Callable[[list[Member]], list[Member]]


def _extra(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> Edit:
    def edit(members: list[Member]) -> list[Member]:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, linkname
        return [*members, (info, b"x" if kind == tarfile.REGTYPE else None)]
    return edit


def _changed(name_end: str, change: Callable[[bytes], bytes]) -> Edit:
    def edit(members: list[Member]) -> list[Member]:
        return [(m, change(d) if m.name.endswith(name_end) and d is not None else d) for m, d in members]
    return edit


def _import_refused(receiver: Path, bad: Path, code: int, text: str) -> None:
    before = _state(receiver)
    _refused(_invoke(receiver, "import", str(bad)), code, text)
    assert _state(receiver) == before


def test_export_then_import_round_trips_and_a_second_import_appends_nothing(
    theirs: tuple[Path, Path], pack: Path, ours: Path, tmp_path: Path,
) -> None:
    their_root, their_run = theirs
    members = _members(pack)
    names = [m.name for m, _ in members]
    assert names[:3] == ["pack.json", "ledger.jsonl", their_run.name]
    assert all(n.startswith(f"{their_run.name}/") for n in names[3:])
    record = json.loads(members[0][1] or b"")
    their_ledger = Ledger.load(their_root / LEDGER)
    bundle = their_ledger.entries[-1]
    first = record["ledger"]["first_seq"]
    assert record == {"format": "capsule-run-pack/1", "run_id": their_run.name, "plan": PLAN_TOML,
                      "ledger": {"first_seq": first, "last_seq": bundle.seq}}
    assert their_ledger.entries[first - 1].kind in ("seal", "amend")  # the record of its plan
    assert their_ledger.entries[first - 1].path == PLAN_TOML
    lines = (their_root / LEDGER).read_bytes().splitlines(keepends=True)
    assert members[1][1] == b"".join(lines[first - 1 :])  # byte for byte
    again = tmp_path / "again.tar.gz"
    assert _invoke(their_root, "export", str(their_run), "--out", str(again)).exit_code == 0
    assert again.read_bytes() == pack.read_bytes()  # the same run packs to the same bytes

    before = Ledger.load(ours / LEDGER).entries
    result = _invoke(ours, "import", str(pack))
    assert result.exit_code == 0, result.output + result.stderr
    landed = ours / "results" / "smoke" / their_run.name
    assert sorted(p.name for p in landed.parent.iterdir()) == [their_run.name]  # no staging left
    after = Ledger.load(ours / LEDGER).entries
    assert after[: len(before)] == before and len(after) == len(before) + 1
    entry = after[-1]
    assert entry.kind == "import" and entry.path == f"results/smoke/{their_run.name}/bundle.dsse.json"
    assert entry.sha256 == sha256_file(their_run / "bundle.dsse.json") and entry.foreign_seq == bundle.seq
    verify_ledger(ours / LEDGER)
    verified = _invoke(ours, "verify", str(landed))
    assert verified.exit_code == 0 and "imported chain" in verified.stdout, verified.output + verified.stderr

    state = _state(ours)
    second = _invoke(ours, "import", str(pack))
    assert second.exit_code == 0 and "already recorded" in second.stdout, second.output + second.stderr
    assert _state(ours) == state
    _refused(_invoke(ours, "export", str(landed), "--out", str(tmp_path / "x.tar.gz")), 2,
             "only runs made here are exported")
    assert not (tmp_path / "x.tar.gz").exists()

    resigned = copy_run(their_run, ours / "results" / "elsewhere")  # the same run, signed again
    sign(resigned, None, key=generate_signer())
    state = _state(ours)
    _refused(_invoke(ours, "import", str(resigned), "--ledger", str(their_root / LEDGER)), 3,
             f"at entry {entry.seq} (import) with another envelope")
    assert _state(ours) == state


def test_a_directory_already_at_the_runs_place_is_refused(theirs: tuple[Path, Path], pack: Path,
                                                          ours: Path) -> None:
    place = ours / "results" / "smoke" / theirs[1].name
    place.mkdir(parents=True)
    (place / "notes.txt").write_text("mine\n")
    _import_refused(ours, pack, 2, "exists and is not this run")
    assert [p.name for p in place.parent.iterdir()] == [place.name]


def test_the_directory_form_still_needs_ledger_and_a_pack_refuses_it(
    theirs: tuple[Path, Path], pack: Path, receiver: Path,
) -> None:
    before = _state(receiver)
    _refused(_invoke(receiver, "import", str(theirs[1])), 2, "give --ledger THEIR_LEDGER")
    _refused(_invoke(receiver, "import", str(pack), "--ledger", str(theirs[0] / LEDGER)), 2, "drop --ledger")
    assert _state(receiver) == before


def _truncated(pack: Path, out: Path) -> Path:
    out.write_bytes(pack.read_bytes()[: pack.stat().st_size // 2])
    return out


def _not_gzip(pack: Path, out: Path) -> Path:
    out.write_bytes(gzip.decompress(pack.read_bytes()))  # a plain tar
    return out


BAD_PACKS: dict[str, tuple[Callable[[Path, Path, str], Path], int, str]] = {
    "truncated": (lambda p, o, r: _truncated(p, o), 2, "truncated"),
    "not gzip": (lambda p, o, r: _not_gzip(p, o), 2, "not a gzip-compressed tar"),
    "dot-dot": (lambda p, o, r: _repack(p, o, _extra(f"{r}/../evil")), 2, "`..`"),
    "absolute": (lambda p, o, r: _repack(p, o, _extra("/tmp/evil")), 2, "absolute"),
    "symlink": (lambda p, o, r: _repack(p, o, _extra(f"{r}/link", tarfile.SYMTYPE, "/etc/passwd")), 2,
                "a symbolic link"),
    "hard link": (lambda p, o, r: _repack(p, o, _extra(f"{r}/link", tarfile.LNKTYPE, f"{r}/plan.toml")), 2,
                  "a hard link"),
    "device": (lambda p, o, r: _repack(p, o, _extra(f"{r}/dev", tarfile.CHRTYPE)), 2, "a character device"),
    "fifo": (lambda p, o, r: _repack(p, o, _extra(f"{r}/fifo", tarfile.FIFOTYPE)), 2, "a FIFO"),
    "outside": (lambda p, o, r: _repack(p, o, _extra("stray.txt")), 2, "outside the run's directory"),
    "twice": (lambda p, o, r: _repack(p, o, _extra(f"{r}/plan.toml")), 2, "appears twice"),
    "no pack.json": (lambda p, o, r: _repack(p, o, lambda ms: [x for x in ms if x[0].name != "pack.json"]), 2,
                     "no pack.json"),
    "wrong format": (lambda p, o, r: _repack(p, o, _changed("pack.json", lambda d: d.replace(
        b"capsule-run-pack/1", b"capsule-run-pack/9"))), 2, "this capsule reads"),
    "run file altered": (lambda p, o, r: _repack(p, o, _changed(f"{r}/RESULTS.md", lambda d: d + b"x")), 3,
                         "RESULTS.md"),
    "entry altered": (lambda p, o, r: _repack(p, o, _changed("ledger.jsonl", _edit_last_entry)), 3,
                      "hash differs"),
    "first entry altered": (lambda p, o, r: _repack(p, o, _changed("ledger.jsonl", lambda d: d.replace(
        b'"note":"', b'"note":"edited ', 1))), 3, "byte for byte"),
    "starts late": (lambda p, o, r: _repack(p, o, _drop_first_entry), 3, "does not chain"),
}


def _edit_last_entry(data: bytes) -> bytes:
    """The packed entries with the last one's note changed (still canonical JSON, its hash now wrong)."""
    *head, last, end = data.split(b"\n")
    return b"\n".join([*head, last.replace(b'"note":"', b'"note":"edited ', 1), end])


def _drop_first_entry(members: list[Member]) -> list[Member]:
    """The packed entries without the plan's record, pack.json's first_seq moved past it."""
    edited: list[Member] = []
    for info, data in members:
        if info.name == "ledger.jsonl" and data is not None:
            data = data.split(b"\n", 1)[1]
        elif info.name == "pack.json" and data is not None:
            record = json.loads(data)
            record["ledger"]["first_seq"] += 1
            data = canonical_json(record) + b"\n"
        edited.append((info, data))
    return edited


@pytest.mark.parametrize("name", sorted(BAD_PACKS))
def test_a_bad_pack_is_refused_with_one_line_and_nothing_written(
    name: str, pack: Path, receiver: Path, tmp_path: Path,
) -> None:
    make, code, text = BAD_PACKS[name]
    _import_refused(receiver, make(pack, tmp_path / "bad.tar.gz", _run_id(pack)), code, text)


@pytest.mark.parametrize(("bound", "value", "text"), [
    ("MAX_UNPACKED_BYTES", 1000, "more than 1000 bytes"), ("MAX_MEMBERS", 5, "more than 5 members"),
])
def test_a_pack_beyond_the_bounds_is_refused(bound: str, value: int, text: str, pack: Path, receiver: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pack_reader, bound, value)
    _import_refused(receiver, pack, 2, text)


def test_a_pack_of_a_plan_this_ledger_lacks_is_refused(pack: Path, tmp_path: Path) -> None:
    root = tmp_path / "other"
    (root / "prereg").mkdir(parents=True)
    _local_entry(root, "other")  # a ledger of its own, which never sealed the smoke plan
    (root / "results").mkdir()
    _import_refused(root, pack, 2, "is not sealed in")


def test_export_refuses_an_unfinished_run_an_unrecorded_run_and_an_existing_out(
    theirs: tuple[Path, Path], receiver: Path, tmp_path: Path,
) -> None:
    root, run = theirs
    out = tmp_path / "pack.tar.gz"
    unfinished = copy_run(run, tmp_path / "unfinished")
    (unfinished / "bundle.dsse.json").unlink()
    _refused(_invoke(root, "export", str(unfinished), "--out", str(out)), 2, "incomplete")
    altered = copy_run(run, tmp_path / "altered")
    (altered / "RESULTS.md").write_text("edited\n")
    _refused(_invoke(root, "export", str(altered), "--out", str(out)), 3, "RESULTS.md")
    _refused(_invoke(root, "export", str(run), "--out", str(out), "--ledger", str(receiver / LEDGER)), 2,
             "by no bundle entry")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["altered", "unfinished"]
    out.write_bytes(b"mine")
    _refused(_invoke(root, "export", str(run), "--out", str(out)), 2, "exists")
    assert out.read_bytes() == b"mine"
    _refused(_invoke(root, "export", str(run), "--out", str(run / "pack.tar.gz")), 2, "inside the run")
    shutil.rmtree(unfinished)

"""Run packs: one file that carries a signed run and the ledger entries that prove it.

A pack is a gzip-compressed tar (stdlib `tarfile`), written by `write_pack` in this order:

- `pack.json`: `{"format": "capsule-run-pack/1", "run_id", "plan", "ledger": {"first_seq",
  "last_seq"}}` (`plan`: the plan's repo-relative path, as the run's bundle names it);
- `ledger.jsonl`: the exporting ledger's entries `first_seq`..`last_seq`, its canonical lines byte
  for byte: from its record (seal / amend) of the run's plan bytes to the run's `bundle` entry;
- `<run_id>/`, its subdirectories, then `<run_id>/...`: the run directory, every file as bundled
  (bundle.json, its envelope and key too).

Members carry no owner, mode 0644 / 0755 and time 0, and the gzip header no time or name, so the
same run and entries always pack to the same bytes. Reading one safely is `capsule.evidence.pack_reader`'s
job; what its files and entries prove, `capsule.evidence.pack_import`'s.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import IO

from capsule.errors import BadInputError
from capsule.hashing import canonical_json

PACK_FORMAT = "capsule-run-pack/1"
PACK_RECORD = "pack.json"
PACK_LEDGER = "ledger.jsonl"


def _add(tar: tarfile.TarFile, name: str, data: IO[bytes] | None = None, size: int = 0) -> None:
    """One member with no owner, a fixed mode and time 0 (the same run packs to the same bytes)."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.REGTYPE if data is not None else tarfile.DIRTYPE
    info.mode, info.size, info.mtime = (0o644, size, 0) if data is not None else (0o755, 0, 0)
    tar.addfile(info, data)


def write_pack(out: Path, run_dir: Path, files: list[str], *, run_id: str, plan_path: str,
               ledger_lines: bytes, first_seq: int, last_seq: int) -> int:
    """Write the pack of `run_dir` (its `files`, relative POSIX paths) and the entries `ledger_lines`
    to `out`, which must not exist: into a temporary file beside it, fsynced, then linked into place
    (never over a file that appeared meanwhile). Returns the pack's size in bytes."""
    record = {"format": PACK_FORMAT, "run_id": run_id, "plan": plan_path,
              "ledger": {"first_seq": first_seq, "last_seq": last_seq}}
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as stream, \
                    tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
                data = canonical_json(record) + b"\n"
                _add(tar, PACK_RECORD, io.BytesIO(data), len(data))
                _add(tar, PACK_LEDGER, io.BytesIO(ledger_lines), len(ledger_lines))
                directories = sorted({str(p) for f in files for p in PurePosixPath(f).parents} - {"."})
                for name in ["", *directories]:
                    _add(tar, f"{run_id}/{name}".rstrip("/"))
                for name in files:
                    with open(run_dir.joinpath(*name.split("/")), "rb") as handle:
                        _add(tar, f"{run_id}/{name}", handle, os.fstat(handle.fileno()).st_size)
            raw.flush()
            os.fsync(raw.fileno())
        _link(Path(tmp), out)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return out.stat().st_size


def _link(tmp: Path, out: Path) -> None:
    """Put `tmp` at `out` only if `out` does not exist (a hard link; a rename on a file system
    without them), then fsync the directory."""
    new = "a pack is never overwritten: give a new --out path"
    try:
        os.link(tmp, out)
    except FileExistsError:
        raise BadInputError(f"{out}: exists; {new}") from None
    except OSError:
        if os.path.lexists(out):
            raise BadInputError(f"{out}: exists; {new}") from None
        os.replace(tmp, out)
    directory = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)

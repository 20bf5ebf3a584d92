"""Reading a run pack (`capsule.evidence.run_pack`: its layout) safely: every header is checked
before anything is written.

`read_pack` refuses, each failure one BadInputError (exit 2): a truncated or corrupt gzip stream or
tar; a member that is not a regular file or a directory (a symbolic or hard link, a device, a FIFO,
a sparse file); a name that is absolute, not normalized or has a `..` part; a member outside
`<run_id>/` other than `pack.json` and `ledger.jsonl`, or one named twice; more than MAX_MEMBERS
members or MAX_UNPACKED_BYTES of files; `pack.json` missing or wrong; `ledger.jsonl` not the entries
`pack.json` names. `extract_run` then writes the run's files into a directory the caller made,
reading the same headers again (a pack changed in between is refused).
"""

from __future__ import annotations

import gzip
import os
import re
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from capsule.errors import BadInputError
from capsule.evidence.run_pack import PACK_FORMAT, PACK_LEDGER, PACK_RECORD
from capsule.jsonio import parse_json

# A real run (541 prompts x 12 arms, its scores, plots and report) is a few tens of MB in a few
# hundred files: these bounds are ten times that and more, and stop a pack that would fill the disk
# (a gzip bomb) or take the tar's headers into memory without end.
MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 512 * 1024 * 1024
MAX_RECORD_BYTES = 64 * 1024  # pack.json is a few hundred bytes
MAX_PLAN_BYTES = 1024 * 1024  # a plan.toml is a few kB
_HEADER_BYTES = 4 * 512  # per member: its header, a pax header and its data (a long name), padding
_RECORD_SIZE = 20 * 512  # a tar ends padded to a record of this many bytes
_CHUNK = 1 << 20
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # one path component, as run ids are made
_CORRUPT = (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError)


@dataclass(frozen=True)
class Pack:
    """A pack whose headers and `pack.json` passed `read_pack`: what `extract_run` writes."""

    path: Path
    run_id: str
    plan_path: str
    first_seq: int
    last_seq: int
    ledger_lines: bytes  # ledger.jsonl's bytes: last_seq - first_seq + 1 lines, each with its newline
    plan_bytes: bytes  # the run's plan.toml copy (its name says where the run goes)
    members: tuple[tuple[str, bool, int], ...]  # the run's members in order: (name, is_dir, size)


def _bad(path: Path, what: str) -> BadInputError:
    """The one-line refusal of the pack at `path` (exit 2)."""
    return BadInputError(f"{path}: {what}; nothing was written")


def _name_problem(name: str) -> str | None:
    """Why a member name is refused (None: a plain relative POSIX path)."""
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return "is absolute or not a POSIX path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "has a `..` or `.` part or is not normalized"
    return None


def _type_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member's type is refused (None: a regular file or a directory)."""
    for test, what in ((member.issym, "a symbolic link"), (member.islnk, "a hard link"),
                       (member.ischr, "a character device"), (member.isblk, "a block device"),
                       (member.isfifo, "a FIFO"), (member.issparse, "a sparse file")):
        if test():
            return what
    return None if member.isreg() or member.isdir() else f"of tar type {member.type!r}"


def _check_stream(path: Path) -> None:
    """Decompress the whole gzip stream once, counting: a truncated or corrupt file (its CRC and
    length checked at the end) or one that unpacks beyond the bounds is refused before the tar is read."""
    bound = MAX_UNPACKED_BYTES + MAX_MEMBERS * _HEADER_BYTES + _RECORD_SIZE
    total = 0
    try:
        with gzip.open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                total += len(chunk)
                if total > bound:
                    raise _bad(path, f"unpacks to more than {bound} bytes (the bound: {MAX_UNPACKED_BYTES} "
                                     f"bytes of files in at most {MAX_MEMBERS} members)")
    except _CORRUPT as error:
        raise _bad(path, f"truncated, or not a gzip-compressed tar ({error}); a run pack is made by "
                         "`capsule export RUN --out FILE`") from None


@contextmanager
def _open_tar(path: Path) -> Iterator[tarfile.TarFile]:
    """The pack opened as a tar; a header or stream tarfile cannot read is one refusal."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            yield tar
    except _CORRUPT as error:
        raise _bad(path, f"a corrupt tar ({error})") from None


def _headers(path: Path, tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Every member's header, each checked for its type and name, within MAX_MEMBERS and
    MAX_UNPACKED_BYTES; no name twice."""
    count, total, seen = 0, 0, set()
    while (member := tar.next()) is not None:
        count += 1
        if count > MAX_MEMBERS:
            raise _bad(path, f"holds more than {MAX_MEMBERS} members (the bound)")
        problem = _type_problem(member)
        if problem is not None:
            raise _bad(path, f"member {member.name!r} is {problem}: a pack holds files and directories only")
        problem = _name_problem(member.name)
        if problem is not None:
            raise _bad(path, f"member name {member.name!r} {problem}")
        if member.name in seen:
            raise _bad(path, f"member {member.name!r} appears twice")
        seen.add(member.name)
        total += member.size
        if total > MAX_UNPACKED_BYTES:
            raise _bad(path, f"its files hold more than {MAX_UNPACKED_BYTES} bytes (the bound)")
        yield member


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int, path: Path) -> bytes:
    """A small member's bytes (pack.json, ledger.jsonl, the plan copy), at most `limit` of them."""
    if member.size > limit:
        raise _bad(path, f"member {member.name} is {member.size} bytes, more than {limit}")
    handle = tar.extractfile(member)
    return handle.read() if handle is not None else b""


def _record(path: Path, data: bytes | None) -> dict[str, Any]:
    """pack.json's fields, checked: its format, a run id, a plan path, the two seqs."""
    if data is None:
        raise _bad(path, f"no {PACK_RECORD}")
    pack = parse_json(data, f"{path}: {PACK_RECORD}")
    ledger = pack.get("ledger") if isinstance(pack, dict) else None
    if not isinstance(pack, dict) or set(pack) != {"format", "run_id", "plan", "ledger"}:
        raise _bad(path, f"{PACK_RECORD} must hold exactly format, run_id, plan, ledger")
    if pack["format"] != PACK_FORMAT:
        raise _bad(path, f"{PACK_RECORD} format {pack['format']!r}; this capsule reads {PACK_FORMAT!r}")
    if not isinstance(pack["run_id"], str) or not _RUN_ID.fullmatch(pack["run_id"]):
        raise _bad(path, f"{PACK_RECORD} run_id {pack['run_id']!r} is no run id")
    if not isinstance(pack["plan"], str) or _name_problem(pack["plan"]) is not None:
        raise _bad(path, f"{PACK_RECORD} plan {pack['plan']!r} is no repo-relative path")
    seqs = [ledger.get(key) if isinstance(ledger, dict) else None for key in ("first_seq", "last_seq")]
    first, last = (seq if isinstance(seq, int) and not isinstance(seq, bool) else 0 for seq in seqs)
    if not isinstance(ledger, dict) or set(ledger) != {"first_seq", "last_seq"} or not 1 <= first <= last:
        raise _bad(path, f"{PACK_RECORD} ledger must be {{first_seq, last_seq}}, 1 <= first_seq <= last_seq")
    return pack


def read_pack(path: Path) -> Pack:
    """Read and check a pack's headers, `pack.json`, `ledger.jsonl` and the run's plan copy, writing
    nothing (see the module doc); BadInputError naming the first problem."""
    if not path.is_file():
        raise _bad(path, "not a regular file")
    _check_stream(path)
    special: dict[str, bytes] = {}
    members: list[tuple[str, bool, int]] = []
    plan_bytes = None
    with _open_tar(path) as tar:
        for member in _headers(path, tar):
            if member.name in (PACK_RECORD, PACK_LEDGER):
                if not member.isreg():
                    raise _bad(path, f"{member.name} is not a regular file")
                limit = MAX_RECORD_BYTES if member.name == PACK_RECORD else MAX_UNPACKED_BYTES
                special[member.name] = _read_member(tar, member, limit, path)
                continue
            members.append((member.name, member.isdir(), member.size))
            if member.name.count("/") == 1 and member.name.endswith("/plan.toml") and member.isreg():
                plan_bytes = _read_member(tar, member, MAX_PLAN_BYTES, path)
    pack = _record(path, special.get(PACK_RECORD))
    run_id = pack["run_id"]
    first, last = pack["ledger"]["first_seq"], pack["ledger"]["last_seq"]
    files = {name for name, is_dir, _size in members if not is_dir}
    for name, is_dir, _size in members:
        if PurePosixPath(name).parts[0] != run_id or (name == run_id and not is_dir):
            raise _bad(path, f"member {name!r} is outside the run's directory {run_id}/")
        clash = next((str(p) for p in PurePosixPath(name).parents if str(p) in files), None)
        if clash is not None:
            raise _bad(path, f"member {name!r} lies under {clash!r}, a file")
    lines = special.get(PACK_LEDGER)
    parts = lines.split(b"\n") if lines is not None else [b"?"]
    if lines is None or parts[-1] or not all(parts[:-1]) or len(parts) - 1 != last - first + 1:
        raise _bad(path, f"{PACK_LEDGER} must hold the {last - first + 1} entries {first}..{last} that "
                         f"{PACK_RECORD} names, one line each")
    if plan_bytes is None:
        raise _bad(path, f"no {run_id}/plan.toml (the run's plan copy)")
    return Pack(path, run_id, pack["plan"], first, last, lines, plan_bytes, tuple(members))


def extract_run(pack: Pack, into: Path) -> Path:
    """Write the pack's run directory into `into` (an empty directory the caller made and removes on
    failure) and return it: `into / run_id`. Each header is read again and must be the one
    `read_pack` checked; files are created new (never through a link), fsynced."""
    expected = iter(pack.members)
    with _open_tar(pack.path) as tar:
        for member in tar:
            if member.name in (PACK_RECORD, PACK_LEDGER):
                continue
            if (member.name, member.isdir(), member.size) != next(expected, None) or _type_problem(member):
                raise _bad(pack.path, "changed while it was read")
            try:
                _write_member(tar, member, into.joinpath(*member.name.split("/")))
            except OSError as error:  # a full disk, a directory not writable
                why = error.strerror or error
                raise _bad(pack.path, f"cannot write {member.name} into {into} ({why})") from None
    if next(expected, None) is not None:
        raise _bad(pack.path, "changed while it was read")
    return into / pack.run_id


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    """One checked member at `target`: a directory, or a new file (O_EXCL, no link followed), fsynced."""
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        _copy(source, handle, member.size)
        os.fsync(handle.fileno())


def _copy(source: IO[bytes] | None, target: IO[bytes], size: int) -> None:
    """Copy at most `size` bytes (the checked header's) in chunks, never the whole file in memory."""
    left = size
    while left > 0 and source is not None and (chunk := source.read(min(_CHUNK, left))):
        target.write(chunk)
        left -= len(chunk)

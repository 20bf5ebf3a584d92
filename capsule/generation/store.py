"""One arm's files in a run directory: `generations/<arm>.jsonl` (rows, appended per batch) and its sidecar.

Rows are appended one whole batch per write and fsynced, so the file holds whole batches only (a
torn final line, left if the machine died mid-write, is cut off on open). The sidecar records the
arm, its identity (everything that determines the rows: numerics settings, keys, input ids, batch
composition, plan hash) and one segment per run. On restart the identity must match exactly, or
the store refuses before any model loads and leaves every existing file untouched.

Several processes may write one arm at once (lanes running batch shares of it,
`capsule.prereg.engine_sharing.Shard`): every read and write of the arm's two files happens under
one lock (`capsule.locks.hold` on `generations/`), each batch is appended whole under it, and each
process updates only its own segment of the sidecar, read afresh from disk, so no writer loses
another's rows or segments. Each segment records where it ran (`Placement`: lane, device, batch
share) and the batches it wrote.

Whether an arm is complete is answered by `ArmStore.complete` while it runs, and by
`capsule.generation.arm_status` (`arm_done`, `recorded_status`)
afterwards: the arm runner, the generate stage and a finished run's checks all ask it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capsule.atomic import append_jsonl_durable, truncate_torn_tail
from capsule.errors import BadInputError, VerificationError
from capsule.faults import crash_point
from capsule.generation.arm_identity import arm_dict, now_iso
from capsule.generation.arm_sidecar import (
    COMPLETE,
    PARTIAL,
    RUNNING,
    BatchShare,
    ImportedSidecar,
    Segment,
    Sidecar,
    is_int,
    load_sidecar,
    write_sidecar,
)
from capsule.generation.batching import Batch
from capsule.hashing import sha256_json
from capsule.jsonio import read_jsonl_complete
from capsule.locks import hold
from capsule.prereg.engine_sharing import Shard
from capsule.prereg.plan import Arm
from capsule.run_dir import RunDir


@dataclass(frozen=True)
class Placement:
    """Where one segment of an arm runs: its lane (1-based), the device the lane sees, the
    lane's batch share of the arm (None: all of it), and the Ray node the lane runs on."""

    lane: int
    device: str
    shard: Shard | None = None
    node: str | None = None

    @property
    def batch_share(self) -> BatchShare | None:
        """The shard as its segment records it (1-based shares)."""
        if self.shard is None:
            return None
        return BatchShare(tuple(i + 1 for i in self.shard.indices), self.shard.count)


_LOCK_WAIT_S = 600.0  # another lane's append or sidecar write takes milliseconds; a stuck one, not


@dataclass
class ArmStore:
    """The two files of one arm in a run directory, and what they already hold."""

    run: RunDir
    arm_name: str
    sidecar: Sidecar | None = None  # as opened or last written
    persisted: bool = False  # the sidecar exists on disk (it is first written with the first rows)
    segment: Segment | None = None  # this process's segment, while it runs
    segment_at: int | None = None  # its index in the sidecar's segments, once written there
    placement: Placement | None = None

    @property
    def rows_path(self) -> Path:
        """The arm's generation rows."""
        return self.run.generations(self.arm_name)

    @property
    def meta_path(self) -> Path:
        """The arm's sidecar (settings, identity, segments, status)."""
        return self.run.generations_meta(self.arm_name)

    @property
    def elapsed_s(self) -> float:
        """Seconds the arm's earlier segments generated for (0 before its first)."""
        return self.sidecar.elapsed_s if self.sidecar is not None else 0.0

    @property
    def complete(self) -> bool:
        """Whether the sidecar on disk, as opened or last written, says the arm is complete."""
        return self.persisted and self.sidecar is not None and self.sidecar.status == COMPLETE

    def _exclusive(self) -> Any:
        """The lock every read and write of the arm's files happens under (one writer at a time
        across the lanes that share `generations/`)."""
        return hold(self.rows_path.parent, f"{self.rows_path.parent} (arm {self.arm_name})", _LOCK_WAIT_S)

    def check_writable(self) -> None:
        """Create the directory and prove a file can be written there (BadInputError otherwise)."""
        directory = self.rows_path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=directory)
            os.close(fd)
            os.unlink(probe)
        except OSError as error:
            raise BadInputError(
                f"{directory}: output directory not writable ({error.strerror}); use --out"
            ) from error

    def open(self, identity: dict[str, Any], batches: list[Batch]) -> set[int]:
        """Check an existing arm was written under `identity`; return the indices of finished batches."""
        with self._exclusive():
            return self._open(identity, batches)

    def _on_disk(self) -> Sidecar:
        """The sidecar as on disk, which this store can continue (not another harness's import)."""
        sidecar = load_sidecar(self.meta_path)
        if isinstance(sidecar, ImportedSidecar):
            raise BadInputError(
                f"{self.meta_path}: arm {self.arm_name!r} holds samples imported from another harness "
                f"({sidecar.imported.get('harness')!r}); nothing was overwritten: "
                "use another --out or arm name"
            )
        return sidecar

    def _open(self, identity: dict[str, Any], batches: list[Batch]) -> set[int]:
        if self.rows_path.exists() and not self.meta_path.exists():
            raise BadInputError(
                f"{self.rows_path}: exists without {self.meta_path.name}; move it away to rerun"
            )
        self.persisted = self.meta_path.exists()
        if self.persisted:
            self.sidecar = self._on_disk()
            if self.sidecar.identity_sha256 != sha256_json(identity):
                recorded = self.sidecar.identity
                changed = sorted(
                    k for k in set(identity) | set(recorded) if identity.get(k) != recorded.get(k)
                )
                raise BadInputError(
                    f"{self.meta_path}: arm {self.arm_name!r} was written under different settings "
                    f"(differs in {changed}); nothing was overwritten: use another --out or arm name"
                )
        truncate_torn_tail(self.rows_path, "generations file")
        by_key = {key: b.index for b in batches for key in b.keys}
        seen: dict[int, list[int]] = {}
        for row in read_jsonl_complete(self.rows_path, "generations file"):
            key, index = row.get("key"), row.get("batch_index")
            if not is_int(key) or not is_int(index):
                raise BadInputError(
                    f"{self.rows_path}: a row's `key` or `batch_index` is not an integer "
                    f"({key!r}, {index!r}); move the arm's files away to rerun it"
                )
            if by_key.get(key) != index or key in seen.get(index, []):
                raise VerificationError(
                    f"{self.rows_path}: row for key {key} (batch {index}) is unexpected or repeated"
                )
            seen.setdefault(index, []).append(key)
        done = set()
        for index, keys in seen.items():
            if sorted(keys) != sorted(batches[index].keys):
                raise VerificationError(f"{self.rows_path}: batch {index} is incomplete; the file was edited")
            done.add(index)
        return done

    def start(
        self, arm: Arm, identity: dict[str, Any], plan_hash: str, manifest_digest: str,
        placement: Placement | None = None,
    ) -> None:
        """Record a new segment (and the arm, on first run) before generation begins."""
        if self.sidecar is None:
            self.sidecar = Sidecar(
                arm=arm_dict(arm), identity=identity, identity_sha256=sha256_json(identity),
                plan_hash=plan_hash, started_at=now_iso(), manifest_digest=manifest_digest, status=RUNNING,
            )
        # caps may have been raised; numerics are in `identity`
        self.sidecar = replace(
            self.sidecar, arm=arm_dict(arm), manifest_digest=manifest_digest, status=RUNNING
        )
        self.placement = placement
        self.segment = Segment(
            started_at=now_iso(), manifest_digest=manifest_digest, rows=0,
            lane=placement.lane if placement else None, device=placement.device if placement else None,
            batch_share=placement.batch_share if placement else None,
            node=placement.node if placement else None,
        )
        self.segment_at = None
        if self.persisted:
            with self._exclusive():
                self._write_sidecar(status=RUNNING)

    def _write_sidecar(self, **changes: Any) -> None:
        """Under the lock: the sidecar as on disk (another lane may have written it since; else the
        one held here), with this process's segment in its place and `changes` applied, written."""
        assert self.sidecar is not None and self.segment is not None, "start() comes first"
        base = self.sidecar
        if self.meta_path.exists():
            base = self._on_disk()
            if base.identity_sha256 != self.sidecar.identity_sha256:
                raise VerificationError(
                    f"{self.meta_path}: rewritten under other settings while arm {self.arm_name!r} ran; "
                    "nothing more was written"
                )
            base = replace(base, arm=self.sidecar.arm, manifest_digest=self.sidecar.manifest_digest)
        segments = list(base.segments)
        if self.segment_at is None:
            segments.append(self.segment)
            self.segment_at = len(segments) - 1
        else:
            segments[self.segment_at] = self.segment
        if self.placement is not None:
            changes.update(lane=self.placement.lane, device=self.placement.device)
        base = replace(base, segments=tuple(segments), **changes)
        write_sidecar(self.meta_path, base)
        self.sidecar, self.persisted = base, True

    def append_batch(self, rows: list[dict[str, Any]]) -> None:
        """Append one batch's rows in one durable write (the sidecar goes first, so rows never lack
        it; then it names the batch in this segment)."""
        assert self.segment is not None, "start() comes first"
        with self._exclusive():
            if not self.persisted:
                self._write_sidecar(status=RUNNING)
            append_jsonl_durable(self.rows_path, rows)
            crash_point("after-batch", self.arm_name)  # tests only: a process killed between batches
            self.segment = replace(self.segment, rows=self.segment.rows + len(rows))
            if self.placement is not None and rows:  # which lane wrote which batch
                written = (*(self.segment.batches or ()), int(rows[0]["batch_index"]))
                self.segment = replace(self.segment, batches=written)
                self._write_sidecar()

    def _rows_on_disk(self) -> int:
        if not self.rows_path.exists():
            return 0
        return sum(1 for _ in read_jsonl_complete(self.rows_path, "generations file"))

    def finish(self, reason: str, backend: dict[str, Any], elapsed_s: float, n_keys: int) -> int | None:
        """Close the segment with the backend's describe(): the arm is "complete" once every key's
        row is on disk (whichever lane wrote it), else "partial" with `reason` (or the reason
        another lane recorded, where this segment stopped for none of its own). Returns the rows
        on disk, or None when this process wrote no sidecar.

        An arm with no rows on disk gets no sidecar, so a run that failed before its first batch
        (bad env, out of memory at load) can be rerun with corrected settings.
        """
        assert self.segment is not None and self.sidecar is not None, "start() comes first"
        ended_at = now_iso()
        self.segment = replace(
            self.segment, ended_at=ended_at, elapsed_s=round(elapsed_s, 3), backend=backend, stop=reason
        )
        if not self.persisted:  # a run that wrote nothing (failed to load, say) leaves no files behind
            return None
        with self._exclusive():
            n_rows = self._rows_on_disk()
            complete = n_rows == n_keys
            on_disk = self._on_disk() if self.meta_path.exists() else self.sidecar
            if not complete and on_disk.status == PARTIAL and self.placement and self.placement.shard:
                reason = on_disk.reason or reason  # another share's stop says more
            if complete:
                self.segment = replace(self.segment, stop="")
            self._write_sidecar(
                status=COMPLETE if complete else PARTIAL, reason="" if complete else reason,
                ended_at=ended_at, backend=backend, elapsed_s=round(on_disk.elapsed_s + elapsed_s, 3),
                n_rows=n_rows, n_keys=n_keys,
            )
        return n_rows

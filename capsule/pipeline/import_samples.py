"""`capsule import-samples`: another harness's IFEval samples, turned into a capsule run directory.

Every file is read and checked first (the 541 pinned prompts, no duplicates, the harness's own
verdicts well formed); only then is anything written, into a scratch directory renamed into place,
so a bad file or an interruption leaves nothing behind and an existing directory is never touched.
The directory holds, per imported file (an "arm"), `generations/<arm>.jsonl` (capsule generation
rows), `scores/<arm>.jsonl` (our seeded scores), their sidecars, and `import.json`: the
disagreements with their reasons, both sides' metrics, the letter band, and with `--against` the
paired comparison of the two files.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ifeval_scorer
from capsule.analysis.harness_check import HarnessCheck, check_import, harness_score_rows
from capsule.analysis.harness_paired import PairedSettings, paired_imports, require_common_prompts
from capsule.artifacts.cache import use_cache_for_scorer
from capsule.artifacts.pinned_prompts import fetch_prompts
from capsule.atomic import append_jsonl_durable, check_output_dir, write_json_atomic
from capsule.errors import BadInputError
from capsule.generation.arm_identity import now_iso
from capsule.generation.arm_sidecar import COMPLETE, ImportedSidecar, write_sidecar
from capsule.generation.harness.reader import read_harness_file
from capsule.generation.harness.rows import generation_rows
from capsule.generation.harness.samples import HarnessImport
from capsule.hashing import sha256_file
from capsule.pipeline.stage_score import ScoreSidecar, write_score_rows, write_score_sidecar
from capsule.run_dir import IMPORTS_ROOT, RunDir, safe_name
from ifeval_scorer import Prompt, load_prompts

IMPORT_VERSION = 1


@dataclass(frozen=True)
class ImportRequest:
    """What to import: a harness file, optionally a second one to compare with, and where to write."""

    harness: str
    path: Path
    against: Path | None = None
    against_harness: str | None = None  # default: the first file's harness
    out: Path | None = None  # default: runs/imports/<arm>[-vs-<arm>]
    seed: int = 0  # our scorer's seed (langdetect and the random letter)
    prompts_path: Path | None = None  # default: the pinned, sha256-verified prompt file
    paired: PairedSettings = field(default_factory=PairedSettings)


#: What `arm_name` replaces in a lowercased file stem: anything `NAME_RE` does not allow in a name.
_UNSAFE = re.compile(r"[^a-z0-9_.-]+")
_NAME_LENGTH = 64  # NAME_RE's longest name


def arm_name(path: Path) -> str:
    """An arm name from a file name as the harnesses write them (`samples_ifeval_<date>T<time>.jsonl`,
    `details_ifeval|0_<date>T<time>.parquet`): the stem lowercased, each run of characters `NAME_RE` does not
    allow as one `-`, no leading `-`, `_`, `.`, at most 64 characters; "import" when nothing is left."""
    stem = _UNSAFE.sub("-", path.name.removesuffix(path.suffix).lower())
    name = stem.lstrip("-_.")[:_NAME_LENGTH].rstrip("-.") or "import"
    return safe_name(name, f"{path}: the arm name derived from the file name,")


def arm_names(request: ImportRequest) -> list[str]:
    """One arm name per file; two files giving the same name are refused (the arms would share files)."""
    names = [arm_name(request.path)]
    if request.against is not None:
        other = arm_name(request.against)
        if other == names[0]:
            raise BadInputError(
                f"{request.path} and {request.against} both give the arm name {other!r} (names are the "
                "file names lowercased, unsafe characters as '-'); nothing was written: copy one under "
                "another name"
            )
        names.append(other)
    return names


def _write_arm(run: RunDir, arm: str, imported: HarnessImport, check: HarnessCheck,
               prompts: dict[int, Prompt], seed: int) -> None:
    append_jsonl_durable(run.generations(arm), generation_rows(imported, arm, prompts))
    write_sidecar(
        run.generations_meta(arm),
        ImportedSidecar(
            arm, COMPLETE, {k: check.summary[k] for k in ("harness", "layout", "file", "file_sha256", "n")},
            now_iso(),
        ),
    )
    write_score_rows(run.scores(arm), check.score_rows)
    write_score_sidecar(
        run.scores_meta(arm), ScoreSidecar(sha256_file(run.generations(arm)), seed, len(check.score_rows))
    )


def import_samples(request: ImportRequest) -> tuple[RunDir, dict[str, Any]]:
    """Check and import the request's files (module docstring); return the run directory and record."""
    prompts = load_prompts(fetch_prompts(request.prompts_path).path)
    files = [(request.harness, request.path)]
    if request.against is not None:
        files.append((request.against_harness or request.harness, request.against))
    names = arm_names(request)
    imports = [read_harness_file(harness, path, prompts) for harness, path in files]
    if len(imports) == 2:
        require_common_prompts(imports[0], imports[1])
    target = request.out or IMPORTS_ROOT / "-vs-".join(names)
    check_output_dir(target, "import directory")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BadInputError(
            f"{target}: already exists and is not empty; nothing was written: pass another --out"
        )
    use_cache_for_scorer()
    checks = [check_import(imported, prompts, request.seed) for imported in imports]
    record: dict[str, Any] = {
        "import_version": IMPORT_VERSION,
        "scorer_version": ifeval_scorer.__version__,
        "arms": {name: check.summary for name, check in zip(names, checks, strict=True)},
        "paired": None,
    }
    if len(imports) == 2:
        stored = (harness_score_rows(imports[0], prompts), harness_score_rows(imports[1], prompts))
        record["paired"] = paired_imports(
            (names[0], names[1]), (checks[0].score_rows, checks[1].score_rows), stored, request.paired
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        run = RunDir(scratch)
        for name, imported, check in zip(names, imports, checks, strict=True):
            _write_arm(run, name, imported, check, prompts, request.seed)
        write_json_atomic(run.import_record, record)
        if target.exists():
            target.rmdir()
        scratch.rename(target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return RunDir(target), record

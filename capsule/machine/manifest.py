"""Run manifests: a structured, schema-validated fingerprint of machine, software, numerics, model and data.

Every run writes `manifest.json` into its run directory, and each generations meta file records
`manifest_digest(manifest)`, so a score can always be traced to the machine that produced it.
Probes live in their own modules (`host_probe`, `gpu_probe`, `software_probe`, `numerics_probe`);
this module assembles them, validates against `manifests/schema.json`, writes and loads manifests.
Comparing two manifests is `capsule.machine.diff.diff_manifests` (re-exported here).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from capsule import __version__
from capsule.artifacts.embedded_model import MODEL_RECORD, hash_model_files, read_model_record, tree_digest
from capsule.atomic import write_json_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.hashing import sha256_file, sha256_json
from capsule.jsonio import read_json, read_json_object
from capsule.machine.diff import Diff, Difference, diff_manifests
from capsule.machine.gpu import probe_gpus
from capsule.machine.host import probe_host
from capsule.machine.numerics import probe_numerics
from capsule.machine.software import probe_software, scorer_fingerprint
from capsule.pins import IFEVAL_PROMPTS_SHA256
from capsule.run_dir import RunDir

SCHEMA_VERSION = 2  # 2: no host name and no absolute path (1: had them; still read, for old runs)
READABLE_VERSIONS = (1, SCHEMA_VERSION)
# In a checkout (editable install) the schema sits beside the package; in the image, whose capsule is
# installed into site-packages, the study directory (the working directory) carries manifests/.
_SCHEMA_HOMES = (Path(__file__).resolve().parents[2], Path.cwd())
_SCHEMA_CANDIDATES = [home / "manifests" / "schema.json" for home in _SCHEMA_HOMES]
SCHEMA_PATH = next((path for path in _SCHEMA_CANDIDATES if path.is_file()), _SCHEMA_CANDIDATES[0])

__all__ = [
    "SCHEMA_VERSION",
    "Diff",
    "Difference",
    "build_manifest",
    "diff_manifests",
    "load_manifest",
    "manifest_digest",
    "validate_manifest",
    "write_manifest",
]


def model_fingerprint(model_dir: Path) -> dict[str, Any]:
    """Every model file's sha256, the tree digest and the source, from `capsule-model.json` when present.

    The record was verified file by file when the model was fetched; here its tree digest is checked
    against its file list. A directory without a record (a Hub snapshot) is hashed file by file.
    """
    if not model_dir.is_dir():
        raise BadInputError(f"{model_dir}: model directory not found")
    if (model_dir / MODEL_RECORD).is_file():
        record = read_model_record(model_dir)
        files = dict(record["files"])
        digest = tree_digest(files)
        if record.get("tree_digest") not in (None, digest):
            raise VerificationError(
                f"{model_dir / MODEL_RECORD}: tree_digest {record['tree_digest']} "
                f"does not match its files ({digest}); run `capsule fetch model`"
            )
        name, source = record.get("name"), record.get("source") or {"kind": "unknown"}
    else:
        files = hash_model_files(model_dir)
        digest = tree_digest(files)
        name, source = model_dir.name, {"kind": "directory", "note": f"no {MODEL_RECORD}; files hashed now"}
    # no path: the checksums decide, and a run travels without the sender's layout
    return {"name": name, "source": source, "files": files, "tree_digest": digest}


def prompts_fingerprint(prompts_path: Path) -> dict[str, Any]:
    """The prompt file's sha256, size, and whether it is the pinned IFEval prompt set."""
    if not prompts_path.is_file():
        raise BadInputError(f"{prompts_path}: prompts file not found")
    digest = sha256_file(prompts_path)
    return {
        "sha256": digest,
        "bytes": prompts_path.stat().st_size,
        "pinned_ifeval": digest == IFEVAL_PROMPTS_SHA256,
    }


def build_manifest(
    *,
    model_dir: Path | None,
    prompts_path: Path | None,
    extra_numerics: Mapping[str, Any] | None = None,
    import_torch: bool = False,
    nvml: Any | None = None,
) -> dict[str, Any]:
    """Fingerprint this process's machine, software, numerics settings, model and data as one dict.

    `extra_numerics` carries what only the backend knows (dtype, attention implementation chosen,
    batch-invariance mode, vLLM scheduler settings). torch's flags are read if torch is already
    imported or `import_torch` is set. `nvml` replaces `pynvml` (tests use a recorded fixture).
    The result is validated against the schema before it is returned.
    """
    started = time.perf_counter()
    gpu = probe_gpus(nvml)
    numerics = probe_numerics(import_torch=import_torch, extra=extra_numerics)  # first: may import torch
    manifest: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "capture": {
            "source": "captured",
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "capsule_version": __version__,
            "elapsed_s": None,
        },
        "host": probe_host(),
        "gpus": gpu["gpus"],
        "gpu_system": gpu["gpu_system"],
        "software": probe_software(),
        "numerics": numerics,
        "model": model_fingerprint(model_dir) if model_dir is not None else None,
        "data": {"prompts": prompts_fingerprint(prompts_path) if prompts_path is not None else None},
        "scorer": scorer_fingerprint(),
    }
    manifest["capture"]["elapsed_s"] = round(time.perf_counter() - started, 3)
    validate_manifest(manifest)
    return manifest


INPUT_SECTIONS = ("model", "data")  # what two machines of one run must read the same of


def differing_inputs(manifest: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The input sections (model files, prompt file) in which two manifests differ: a cluster node
    whose model or prompts are not the run's machine's."""
    return [section for section in INPUT_SECTIONS if manifest.get(section) != other.get(section)]


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON: what generations meta files record."""
    return sha256_json(manifest)


def write_manifest(path: Path, manifest: Mapping[str, Any]) -> str:
    """Validate, then atomically write `manifest` (a run dir gets `manifest.json`); return its digest."""
    validate_manifest(manifest, where=str(path))
    if path.is_symlink():
        raise BadInputError(f"{path}: is a symbolic link; a manifest is never written through one")
    target = RunDir(path).manifest if path.is_dir() else path
    write_json_atomic(target, manifest)
    return manifest_digest(manifest)


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    schema = read_json_object(SCHEMA_PATH, "manifest schema")
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _field(error: Any) -> str:
    """The dotted field an error is about; for a missing required property, the missing one."""
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path]
    base = "".join(parts).lstrip(".")
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in (error.instance or {})]
        if missing:
            return f"{base}.{missing[0]}".lstrip(".")
    return base or "(top level)"


def validate_manifest(manifest: Mapping[str, Any], *, where: str = "manifest") -> None:
    """BadInputError naming the field when `manifest` is not a valid manifest of this schema version."""
    if not isinstance(manifest, Mapping):
        raise BadInputError(f"{where}: a manifest must be a JSON object")
    version = manifest.get("schema_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise BadInputError(
            f"{where}: field 'schema_version' is {version!r}, this capsule reads "
            f"{' and '.join(map(str, READABLE_VERSIONS))}; regenerate it with `capsule manifest`"
        )
    errors = sorted(_validator().iter_errors(dict(manifest)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        first = errors[0]
        problem = {
            "required": "required field missing",
            "not": f"holds a host name or a path, which a version {SCHEMA_VERSION} manifest never records",
        }.get(str(first.validator), first.message)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise BadInputError(f"{where}: field '{_field(first)}': {problem}{more}; see {SCHEMA_PATH.name}")


def load_manifest(path_or_run_dir: Path) -> dict[str, Any]:
    """Read and validate a manifest file, or the `manifest.json` of a run directory."""
    path = Path(path_or_run_dir)
    if path.is_dir():
        path = RunDir(path).manifest
    if not path.exists():
        raise BadInputError(f"{path}: not found; give a manifest file or a run directory")
    manifest = read_json(path, "manifest")
    validate_manifest(manifest, where=str(path))
    return dict(manifest)

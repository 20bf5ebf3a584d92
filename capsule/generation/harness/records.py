"""A harness's sample file as (where, record) pairs, `where` being `file:line` (or `file:row N`).

JSON Lines (lm-eval's `samples_*.jsonl`, lighteval details exported with `datasets`' `to_json`), a
JSON array of objects, or parquet (lighteval's own `details_*.parquet`), the last only where
`pyarrow` can be imported: it is not a dependency of the capsule, so without it the error says how
to install it or convert the file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from capsule.errors import BadInputError, UnavailableError
from capsule.jsonio import parse_json, parse_json_line, read_input_bytes

Records = list[tuple[str, Any]]
PARQUET_MAGIC = b"PAR1"


def read_records(path: Path) -> Records:
    """Every record of `path` with its location, in file order (blank lines skipped)."""
    if not path.exists():
        raise BadInputError(f"{path}: harness file not found; give the samples/details file itself")
    data = read_input_bytes(path, "harness samples file")  # a regular file, of bounded size
    if data[:4] == PARQUET_MAGIC:
        return _parquet_records(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInputError(
            f"{path}: cannot read as UTF-8 JSON ({error}); give a JSONL or parquet file"
        ) from error
    if text.lstrip().startswith("["):
        return _array_records(path, text)
    whole = _single_object(path, text)
    if whole is not None:
        raise BadInputError(
            f"{path}:1: one JSON object (keys {', '.join(sorted(whole)[:6])}), not a sample per line: "
            "an aggregate results file? give the per-sample file (lm-eval --log_samples, lighteval details)"
        )
    records: Records = []
    for number, line in enumerate(text.split("\n"), start=1):  # \n only: U+2028 and kin stay in a line
        if not line.strip():
            continue
        records.append((f"{path}:{number}", parse_json_line(line, str(path), number)))
    if not records:
        raise BadInputError(f"{path}: holds no records")
    return records


def _single_object(path: Path, text: str) -> dict[str, Any] | None:
    """The file's one JSON object when it spans several lines (a results file), else None."""
    if text.count("\n") < 2 or not text.lstrip().startswith("{"):
        return None
    try:
        value = parse_json(text, str(path))
    except BadInputError:
        return None
    return value if isinstance(value, dict) else None


def _array_records(path: Path, text: str) -> Records:
    items = parse_json(text, str(path))
    if not isinstance(items, list) or not items:
        raise BadInputError(f"{path}: expected a non-empty JSON array of sample objects")
    return [(f"{path}:item {number}", item) for number, item in enumerate(items, start=1)]


def _parquet_records(path: Path) -> Records:
    try:
        import pyarrow.parquet as parquet
    except ImportError as error:
        raise UnavailableError(
            f"{path}: a parquet file, and pyarrow is not installed here; `{sys.executable} -m pip install "
            "pyarrow` (off the numerics path: an unfinished run still resumes), or "
            "convert it to JSONL (datasets: load_dataset('parquet', data_files=F)['train'].to_json(OUT))"
        ) from error
    try:
        rows = parquet.read_table(path).to_pylist()
    except Exception as error:  # pyarrow raises its own error types for a damaged file
        raise BadInputError(f"{path}: cannot read as parquet ({error})") from error
    if not rows:
        raise BadInputError(f"{path}: holds no records")
    return [(f"{path}:row {number}", row) for number, row in enumerate(rows, start=1)]

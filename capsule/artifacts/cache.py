"""The capsule's one cache directory: pinned prompts, the embedded model, the scorer's NLTK data.

`$CAPSULE_CACHE` wins; otherwise the platform's user cache dir. Created readable and writable by
the current user only, because loaders (NLTK among them) trust what they find there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

from capsule.errors import BadInputError

CACHE_ENV = "CAPSULE_CACHE"
NLTK_DATA_DIRNAME = "nltk_data"  # the scorer's NLTK data, under the cache (the image bakes it there)


def cache_dir() -> Path:
    """Return the cache directory, creating it (mode 0700) if needed."""
    configured = os.environ.get(CACHE_ENV)
    root = Path(configured).expanduser() if configured else Path(platformdirs.user_cache_dir("capsule"))
    return ensure_private_dir(root)


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make it user-only; refuse a path that exists but is not a dir."""
    if path.exists() and not path.is_dir():
        raise BadInputError(f"{path}: exists and is not a directory; set {CACHE_ENV} to a directory")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        path.chmod(0o700)
    return path


def scorer_data_dir() -> Path:
    """Where the scorer's NLTK data lives in the capsule: `<cache>/nltk_data`."""
    return cache_dir() / NLTK_DATA_DIRNAME


def use_cache_for_scorer() -> Path:
    """Make the scorer keep its NLTK data in `scorer_data_dir()`; call before scoring. Returns the dir.

    Nothing is written until the scorer first needs the data.
    """
    from ifeval_scorer.nltk_data import use_data_dir

    directory = scorer_data_dir()
    use_data_dir(directory)
    return directory


def set_aside(path: Path) -> Path:
    """Rename a corrupt cache entry to `<name>.corrupt-N` so it is kept for inspection, never deleted."""
    n = 1
    while True:
        target = path.with_name(f"{path.name}.corrupt-{n}")
        if not target.exists():
            path.rename(target)
            return target
        n += 1

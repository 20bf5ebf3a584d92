"""Pinned artifacts: the cache, PyPI wheel members, the IFEval prompt file, the embedded model."""

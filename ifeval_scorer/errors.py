"""The scorer's errors: each message is one line saying what is wrong, where, and how to fix it.

The scorer raises these and never prints. A program built on it decides how to show them:
`python -m ifeval_scorer` prints `Error: <message>` and exits 2; the capsule's CLI does the same
(exit 3 for a failed verification).
"""

from __future__ import annotations


class ScorerError(Exception):
    """Base class: a problem the caller can act on, described in one line."""


class ScorerInputError(ScorerError, ValueError):
    """A row, generations file, prompt file or data directory given to the scorer is unusable."""


class ScorerDataUnavailableError(ScorerError):
    """Data the scorer needs is not installed here (the pinned Punkt model package)."""


class ScorerVerificationError(ScorerError):
    """The Punkt model source differs from its pinned sha256, or holds something unexpected."""

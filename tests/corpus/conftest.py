"""The corpus's count by loader, printed at the end of any pytest run that collected it."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    module = sys.modules.get("test_bad_input_corpus")
    if module is None:
        return
    by_loader = module.counts(module.CASES)
    pending = [case.id for case in module.CASES if case.xfail]
    terminalreporter.write_line(
        "bad-input corpus: "
        + ", ".join(f"{loader} {number}" for loader, number in by_loader.items())
        + f"; total {len(module.CASES)}; pending (expected to fail): {', '.join(pending) or 'none'}"
    )


@pytest.fixture(autouse=True, scope="module")
def _scorer_data_dir_restored() -> Iterator[None]:
    """`capsule score` points the scorer's NLTK data at the capsule cache for the whole process;
    put the scorer's own default back after the corpus, as a separate process would have it."""
    yield None
    from ifeval_scorer.nltk_data import use_data_dir

    use_data_dir(None)

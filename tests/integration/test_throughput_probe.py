"""The throughput probe of `capsule plan new` on the real embedded model (transformers, fp32),
shortened to a few tokens per prompt so that the test stays within seconds on a small CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from capsule.authoring import probe as probe_module

pytestmark = pytest.mark.slow


def test_probe_measures_generation_throughput(
    embedded_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_module, "PROBE_TOKENS", 8)
    probe = probe_module.probe_throughput(embedded_model_dir, "float32")
    assert 0 < probe.tokens <= probe_module.PROBE_PROMPTS * 8
    assert probe.wall_s > 0 and probe.tokens_per_s == pytest.approx(probe.tokens / probe.wall_s, rel=0.02)
    assert "transformers, float32" in probe.describe("float32")

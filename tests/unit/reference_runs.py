"""The committed reference runs that tests read by role, named once (results/ holds several)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The v2 run (prereg/smollm2-135m-v2, the AVX2 machine): fp32 contrasts only, a schema-1 manifest.
V2_RUN = REPO / "results" / "smollm2-135m" / "20261129T211643Z-1f17cf8b"

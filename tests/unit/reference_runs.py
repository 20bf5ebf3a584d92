"""The committed reference runs that tests read by role, named once (results/ holds several)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The v2 run (prereg/smollm2-135m-v2, the AVX2 machine): fp32 contrasts only, a schema-1 manifest.
V2_RUN = REPO / "results" / "smollm2-135m" / "20261129T211643Z-1f17cf8b"
#: The v3 reference run (prereg/smollm2-135m-v3, `make reproduce` here, bundle entry 29; 2-core Xeon
#: with AVX-512, avx512_bf16 and AMX): the run `capsule plan cost`'s CPU figures are read from.
V3_RUN = REPO / "results" / "smollm2-135m" / "20261201T135829Z-7c0e5f54"
#: The second v3 run, made in another clone on the same kind of CPU and imported (ledger entry 30).
V3_IMPORTED_RUN = REPO / "results" / "smollm2-135m" / "20261201T150926Z-7c0e5f54"

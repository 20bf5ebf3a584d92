"""The committed runs that tests read by role, named once: in results/committed.toml, which
`capsule.evidence.committed_runs` reads (results/ may hold any number of other runs: a newcomer's
own `make reproduce`, an interrupted run, imports; tests never take "the first run found")."""

from __future__ import annotations

from pathlib import Path

from capsule.evidence.committed_runs import read_committed_runs

REPO = Path(__file__).resolve().parents[2]
COMMITTED = read_committed_runs(REPO)
#: Every committed run, in the file's order (the v2 run first).
RUNS = tuple(run.path for run in COMMITTED.runs)
#: The committed comparison files (results/<plan>/comparisons/...).
COMPARISONS = COMMITTED.comparisons
#: The v2 run (prereg/smollm2-135m-v2, the AVX2 machine): fp32 contrasts only, a schema-1 manifest.
V2_RUN = COMMITTED.run("v2").path
#: The v3 reference run (prereg/smollm2-135m-v3, `make reproduce` here, bundle entry 29; 2-core Xeon
#: with AVX-512, avx512_bf16 and AMX): the run `capsule plan cost`'s CPU figures are read from.
V3_RUN = COMMITTED.run("v3").path
#: The second v3 run, made in another clone on the same kind of CPU and imported (ledger entry 30).
V3_IMPORTED_RUN = COMMITTED.run("v3-imported").path
#: A v3 run from another CPU kind (AMD EPYC, AVX-512 with avx512_bf16, no AMX), sent as one file and
#: imported (ledger entries 37 and 38): the reference run's fp32 arms byte-identical, its bf16 arms not.
V3_ZEN5_RUN = COMMITTED.run("v3-zen5").path

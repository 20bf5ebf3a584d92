"""Wall time of the same arms run one after another and on `--lanes 2`, side by side in one run.

Four of the embedded plan's fp32 arms (two engine runs: vLLM at batch 48 and its rerun, transformers
at batch 48 and 16; `--arms` names others), each shrunk to the first `--prompts` prompts and
`--max-new-tokens` tokens, are generated twice by the generate stage `capsule
reproduce` runs (`capsule.pipeline.stage_generate.generate_all`): first sequentially (`--lanes 1`,
this process), then with `--lanes N` (one Ray task per lane, on a Ray started here), each into its
own run directory. Printed: the wall time of each (backend starts and, for lanes, Ray's and the
workers' starts included), their ratio, how many rows of each arm are identical apart from their
timings, and the CPU's vendor and ISA as `capsule manifest` records them (host.cpu). On a shared
2-core machine two lanes compete for the same cores: read the ratio beside the load, not as a GPU's.

    .venv/bin/python benchmarks/lanes.py --prompts 4 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

EMBEDDED_PLAN = Path("prereg/smollm2-135m-v3")
SUBSET = "lanes-benchmark"
TIMING = ("elapsed_s",)  # the one row field that is a measurement, not a generation
DEFAULT_ARMS = "vllm-fp32-b48,vllm-fp32-b48-rerun,hf-fp32-b48,hf-fp32-b16"  # one engine run per lane


def shrunk_plan(plan: Any, arms: list[str] | None, prompts: int, max_new_tokens: int) -> Any:
    """`plan` with only its fp32 arms (or `arms`), each on the first `prompts` prompts and at most
    `max_new_tokens` tokens; every other setting as sealed."""
    from capsule.prereg.plan import Subset

    chosen = [a for a in plan.arms if (a.name in arms if arms else a.dtype == "float32")]
    missing = sorted(set(arms or []) - {a.name for a in chosen})
    if missing:
        raise SystemExit(f"--arms: not arms of {plan.name}: {', '.join(missing)}")
    subsets = {**plan.prompts.subsets, SUBSET: Subset(SUBSET, "first", prompts)}
    shrunk = tuple(dataclasses.replace(a, subset=SUBSET, max_new_tokens=max_new_tokens) for a in chosen)
    return dataclasses.replace(plan, prompts=dataclasses.replace(plan.prompts, subsets=subsets), arms=shrunk)


def generation_rows(run: Path) -> dict[str, list[dict[str, Any]]]:
    """Every arm's rows in `run`, without their timings."""
    rows = {}
    for path in sorted((run / "generations").glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        rows[path.stem] = [{k: v for k, v in row.items() if k not in TIMING} for row in lines]
    return rows


def timed_generation(plan: Any, inputs: Any, run_path: Path, lanes: int) -> float:
    """Generate every arm of `plan` into `run_path` on `lanes` lanes; the wall seconds it took."""
    from capsule.pipeline.lanes import LaneOptions
    from capsule.pipeline.opening import OpenRun
    from capsule.pipeline.run_start import RunStart
    from capsule.pipeline.stage_generate import generate_all
    from capsule.run_dir import RunDir

    record = RunStart(run_id=run_path.name, plan_path=f"prereg/{plan.name}", plan_sha256=inputs.plan_sha256,
                      ledger_head_at_start="none", started="", capsule_version="")
    run = OpenRun(RunDir(run_path), record, resumed=False)
    started = time.monotonic()
    generate_all(
        plan, run, inputs, dry_run=False, progress=False, say=lambda line: print(f"  {line}", flush=True),
        lanes=LaneOptions(lanes),
    )
    return time.monotonic() - started


def main() -> None:
    """Parse the options, run both sides, print the table."""
    from capsule.artifacts.model_store import resolve_model_dir
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.machine.host import probe_cpu
    from capsule.pipeline.stage_generate import GenerateInputs
    from capsule.prereg.loader import load_plan
    from ifeval_scorer import load_prompts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--arms", default=DEFAULT_ARMS, help="Arm names, comma-separated (fp32: all).")
    parser.add_argument("--keep", type=Path, default=None, help="Leave both run directories here.")
    args = parser.parse_args()
    arms = None if args.arms == "fp32" else args.arms.split(",")
    plan = shrunk_plan(load_plan(EMBEDDED_PLAN), arms, args.prompts, args.max_new_tokens)
    prompts = load_prompts(fetch_prompts(None).path)
    inputs = GenerateInputs(prompts, resolve_model_dir(plan.model, None), "lanes-benchmark", "")
    root = args.keep or Path(tempfile.mkdtemp(prefix="capsule-lanes-"))
    root.mkdir(parents=True, exist_ok=True)
    shape = f"{args.prompts} prompts x {args.max_new_tokens} tokens"
    print(f"arms: {', '.join(a.name for a in plan.arms)}; {shape}")
    print("sequential (--lanes 1):", flush=True)
    sequential = timed_generation(plan, inputs, root / "sequential", 1)
    print(f"--lanes {args.lanes}:", flush=True)
    laned = timed_generation(plan, inputs, root / f"lanes-{args.lanes}", args.lanes)
    one, many = generation_rows(root / "sequential"), generation_rows(root / f"lanes-{args.lanes}")
    same = sum(a == b for arm in one for a, b in zip(one[arm], many.get(arm, []), strict=False))
    total = sum(len(rows) for rows in one.values())
    cpu = probe_cpu()
    isa = " ".join(sorted(flag for flag, present in cpu["isa"].items() if present))
    print()
    print(f"date: {datetime.now(UTC).replace(microsecond=0).isoformat()}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    cores = f"{cpu.get('logical_cores')} logical cores"
    print(f"cpu: {cpu.get('vendor')} {cpu.get('model')} (family {cpu.get('family')}); {cores}; ISA: {isa}")
    print(f"| arms | rows | sequential s | --lanes {args.lanes} s | lanes / sequential | identical rows |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(plan.arms)} | {total} | {sequential:.1f} | {laned:.1f} | {laned / sequential:.2f} | "
          f"{same}/{total} |")
    print(f"run directories: {root}")


if __name__ == "__main__":
    main()

"""`capsule reproduce`: run a sealed plan end to end into a run directory a reader can trust.

Steps (each reads files and writes files, so a second call after any interruption continues):
verify the ledger and the plan's seal -> fetch prompts and model (verified) -> open or resume the
run directory -> manifest -> generate every arm (resuming) -> score every arm -> scorer-stability
runs -> analysis.json -> RESULTS.md -> signed bundle appended to the ledger.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from capsule.atomic import append_jsonl_durable, read_jsonl_complete, write_json_atomic, write_text_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.hashing import canonical_json, sha256_file
from capsule.pipeline.opening import OpenRun, open_run_dir
from capsule.prereg.plan import Arm, Plan
from ifeval_scorer import Prompt

Say = Callable[[str], None]
DRY_RUN_MODEL = Path("dry-run-no-model")  # the fake backend and tokenizer never read it


@dataclass(frozen=True)
class ReproduceOptions:
    """Where things are and how to run: none of these change a result (the plan fixes those)."""

    plan_path: Path
    ledger_path: Path
    results_root: Path
    run_dir: Path | None = None
    fresh: bool = False
    dry_run: bool = False  # every arm on the fake backend: walks the whole pipeline in seconds
    model_dir: Path | None = None
    prompts_path: Path | None = None
    signing_key: Path | None = None
    progress: bool = True


@dataclass(frozen=True)
class ReproduceResult:
    """What a finished reproduce left on disk."""

    run_dir: Path
    run_id: str
    headline: dict[str, Any]
    failed_controls: list[str]
    bundle_fingerprint: str


def run_plan_path(run_dir: Path, root: Path) -> Path:
    """The sealed plan a run was made from, as its run.json records it (relative to the repo root)."""
    from capsule.pipeline.opening import read_run_record

    return root / read_run_record(run_dir)["plan_path"]


def _plan_file(path: Path) -> Path:
    return path / "plan.toml" if path.is_dir() else path


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _copy_plan(plan: Plan, plan_file: Path, seal: Mapping[str, Any], run: OpenRun) -> None:
    """Put the sealed plan and its ledger entry into the run directory (once; verified on resume)."""
    copy = run.path / "plan.toml"
    if copy.exists():
        if sha256_file(copy) != seal["sha256"]:
            raise VerificationError(f"{copy}: differs from the sealed plan; the run directory was edited")
        return
    shutil.copyfile(plan_file, copy)
    write_json_atomic(run.path / "plan.seal.json", dict(seal))


def _manifest(run: OpenRun, model_dir: Path | None, prompts_path: Path, say: Say) -> str:
    """Write manifest.json at the first start; on resume refuse a machine whose numerics differ."""
    from capsule.machine.diff import diff_manifests
    from capsule.machine.manifest import build_manifest, load_manifest, manifest_digest, write_manifest

    path = run.path / "manifest.json"
    current = build_manifest(model_dir=model_dir, prompts_path=prompts_path)
    if not path.exists():
        return write_manifest(path, current)
    recorded = load_manifest(path)
    differences = diff_manifests(recorded, current).in_category("numerics")
    if differences:
        listed = "; ".join(f"{d.path}: {d.a} -> {d.b}" for d in differences[:4])
        raise BadInputError(
            f"{run.path}: started on a machine whose numerics differ from this one ({listed}); "
            "finish it there, or start a new run with --fresh"
        )
    say("resuming on the same machine fingerprint (numerics-relevant fields equal)")
    return manifest_digest(recorded)


def arm_keys(plan: Plan, arm: Arm, prompts: Mapping[int, Prompt]) -> list[int]:
    """The prompt keys an arm runs, from its declared subset rule."""
    from capsule.generation.arm_runner import subset_keys

    return subset_keys(plan.prompts.subsets[arm.subset], dict(prompts))


def _generate_all(
    plan: Plan,
    run: OpenRun,
    prompts: dict[int, Prompt],
    model_dir: Path | None,
    plan_hash: str,
    digest: str,
    options: ReproduceOptions,
    say: Say,
) -> None:
    """Generate every arm in plan order, reusing one loaded backend across arms that allow it."""
    from capsule.generation.arm_runner import generate_arm
    from capsule.generation.backends import load_backend, reuse_key

    arms = [
        replace(arm, backend="fake", backend_options={}, env={}) if options.dry_run else arm
        for arm in plan.arms
    ]
    tokenizer = None
    if options.dry_run:
        from capsule.generation.backends.fake import FakeChatTokenizer

        tokenizer, model_dir = FakeChatTokenizer(supports_thinking=True), DRY_RUN_MODEL
    loaded: tuple[Any, Any] | None = None  # (reuse key, backend)
    try:
        for arm in arms:
            keys = arm_keys(plan, arm, prompts)
            key = reuse_key(arm)
            if loaded is None or loaded[0] != key:
                if loaded is not None:
                    loaded[1].close()
                    loaded = None
                if not _arm_done(run.path, arm.name):
                    say(f"loading backend {arm.backend} for arm {arm.name}")
                    loaded = (key, load_backend(arm.backend, _model_path(model_dir), arm, plan.model.loader))
            result = generate_arm(
                arm,
                prompts=prompts,
                keys=keys,
                model_dir=_model_path(model_dir),
                out_dir=run.path,
                plan_hash=plan_hash,
                manifest_digest=digest,
                backend=loaded[1] if loaded else None,
                progress=options.progress,
                tokenizer=tokenizer,
                loader=plan.model.loader,
            )
            state = "complete" if result.complete else f"partial ({result.reason})"
            say(f"arm {arm.name}: {result.n_rows}/{result.n_keys} rows, {state}")
    finally:
        if loaded is not None:
            loaded[1].close()


def _model_path(model_dir: Path | None) -> Path:
    if model_dir is None:
        raise BadInputError("this step needs the model directory")
    return model_dir


def _arm_done(run_path: Path, arm: str) -> bool:
    meta = run_path / "generations" / f"{arm}.meta.json"
    if not meta.exists():
        return False
    return json.loads(meta.read_text(encoding="utf-8")).get("status") == "complete"


def load_generations(run_path: Path, plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Each arm's generation rows as stored (empty list for an arm never started)."""
    return {
        arm.name: read_jsonl_complete(run_path / "generations" / f"{arm.name}.jsonl") for arm in plan.arms
    }


def score_arms(
    run_path: Path,
    plan: Plan,
    generations: Mapping[str, list[dict[str, Any]]],
    prompts: Mapping[int, Prompt],
    *,
    reuse: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Score every arm at the plan's scorer seed into `scores/<arm>.jsonl`.

    A stored score file is reused only if its sidecar says it was made from the very generations
    bytes now on disk. With `reuse=False` every arm is scored afresh and nothing is written (the
    re-derivation check compares those scores with the stored ones).
    """
    from ifeval_scorer import score

    scores: dict[str, list[dict[str, Any]]] = {}
    for arm in plan.arms:
        rows = generations.get(arm.name) or []
        out = run_path / "scores" / f"{arm.name}.jsonl"
        sidecar = out.with_suffix(".meta.json")
        if not rows:
            scores[arm.name] = []
            continue
        made_from = sha256_file(run_path / "generations" / f"{arm.name}.jsonl")
        if reuse and out.exists() and sidecar.exists():
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
            if meta.get("generations_sha256") == made_from and meta.get("seed") == plan.scorer_seed:
                scores[arm.name] = read_jsonl_complete(out)
                continue
        result = list(score(rows, seed=plan.scorer_seed, prompts=prompts).rows)
        scores[arm.name] = result
        if reuse:
            write_text_atomic(out, "".join(canonical_json(row).decode("utf-8") + "\n" for row in result))
            write_json_atomic(
                sidecar, {"generations_sha256": made_from, "seed": plan.scorer_seed, "n": len(result)}
            )
    return scores


def score_fn_for(
    prompts: Mapping[int, Prompt],
) -> Callable[[Sequence[Mapping[str, Any]], int | None], list[dict[str, Any]]]:
    """The scorer as the controls call it: rows and a seed (None = upstream's unseeded draw)."""
    from ifeval_scorer import score

    def run(rows: Sequence[Mapping[str, Any]], seed: int | None) -> list[dict[str, Any]]:
        return list(score(rows, seed=seed, prompts=prompts).rows)

    return run


def band_fn_for(
    prompts: Mapping[int, Prompt], seed: int
) -> Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]:
    """The scorer's exhaustive letter band, as the scorer-stability control calls it."""
    from ifeval_scorer import letter_band

    def run(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        return letter_band(rows, seed=seed, prompts=prompts).as_dict()

    return run


def stability_scores(
    run_path: Path, plan: Plan, generations: Mapping[str, list[dict[str, Any]]], prompts: Mapping[int, Prompt]
) -> dict[str, list[list[dict[str, Any]]]]:
    """The unseeded scorer runs of each scorer_stability control, made once and stored, so that
    analysis.json can later be re-derived from the files alone."""
    from capsule.analysis.scorer_controls import stability_runs

    stored: dict[str, list[list[dict[str, Any]]]] = {}
    for control in plan.controls:
        if control.kind != "scorer_stability" or not generations.get(control.arms[0]):
            continue
        path = run_path / "scores" / "stability" / f"{control.name}.jsonl"
        runs_on_disk = read_jsonl_complete(path)
        if len(runs_on_disk) != control.k:
            runs = stability_runs(control, generations, score_fn_for(prompts))
            path.unlink(missing_ok=True)
            append_jsonl_durable(path, [{"run": i, "rows": rows} for i, rows in enumerate(runs)])
            runs_on_disk = read_jsonl_complete(path)
        stored[control.name] = [entry["rows"] for entry in runs_on_disk]
    return stored


def derive_analysis(
    run_path: Path,
    plan: Plan,
    prompts: Mapping[int, Prompt],
    tokenize: Callable[[str], list[int]] | None,
    *,
    rescore: bool = False,
) -> dict[str, Any]:
    """analysis.json from the files of a run directory: scores (made if missing), stability runs,
    and the plan's rules. A pure function of those files, so anyone can re-derive it; `rescore`
    ignores the stored scores and scores the generations afresh (nothing is written)."""
    from capsule.analysis.derive import build_analysis

    generations = load_generations(run_path, plan)
    scores = score_arms(run_path, plan, generations, prompts, reuse=not rescore)
    stability = stability_scores(run_path, plan, generations, prompts)
    return build_analysis(
        plan,
        generations,
        scores,
        score_fn=score_fn_for(prompts),
        band_fn=band_fn_for(prompts, plan.scorer_seed),
        tokenize=tokenize,
        prompts=prompts,
        stability_scores=stability,
    )


def model_tokenizer(model_dir: Path | None) -> Callable[[str], list[int]] | None:
    """The model tokenizer's encode (no special tokens), for first-divergence indices in tokens."""
    if model_dir is None:
        return None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return encode


def reproduce(options: ReproduceOptions, say: Say) -> ReproduceResult:
    """Run a sealed plan end to end (see the module docstring); resumable at every step."""
    from capsule.artifacts.model_store import resolve_model_dir
    from capsule.artifacts.pinned_prompts import fetch_prompts
    from capsule.evidence.bundle import make_bundle
    from capsule.evidence.signing import fingerprint_of, load_signing_key
    from capsule.prereg.ledger import Ledger, require_sealed
    from capsule.prereg.loader import load_plan
    from capsule.report.document import write_report
    from ifeval_scorer import load_prompts

    plan_file = _plan_file(options.plan_path)
    plan = load_plan(plan_file)
    seal = require_sealed(plan_file, options.ledger_path)
    ledger = Ledger.load(options.ledger_path)
    signer, key_line = load_signing_key(options.signing_key)  # fail on a bad key before hours of work
    fetched = fetch_prompts(options.prompts_path)
    if sha256_file(fetched.path) != plan.prompts.sha256:
        raise VerificationError(
            f"{fetched.path}: not the prompt file the plan pins ({plan.prompts.sha256[:12]}…)"
        )
    prompts = load_prompts(fetched.path)
    say(f"plan {plan.name}: sealed at ledger entry {seal['seq']}; prompts from {fetched.source}")
    model_dir = None if options.dry_run else resolve_model_dir(plan.model, options.model_dir)
    run = open_run_dir(
        results_root=options.results_root / plan.name,
        plan_path=_relative(plan_file, ledger.root),
        plan_sha256=seal["sha256"],
        ledger_head=ledger.head(),
        explicit=options.run_dir,
        fresh=options.fresh,
    )
    say(f"{'resuming' if run.resumed else 'new'} run {run.run_id} in {run.path}")
    _copy_plan(plan, plan_file, seal, run)
    digest = _manifest(run, model_dir, fetched.path, say)
    _generate_all(plan, run, prompts, model_dir, seal["sha256"], digest, options, say)
    say("scoring and analysing")
    analysis = derive_analysis(
        run.path, plan, prompts, None if options.dry_run else model_tokenizer(model_dir)
    )
    write_json_atomic(run.path / "analysis.json", analysis)
    write_report(run.path, fingerprint=fingerprint_of(signer.public_key))
    say(key_line)
    bundle = make_bundle(
        run.path,
        run_id=run.run_id,
        plan_path=run.record["plan_path"],
        plan_sha256=seal["sha256"],
        manifest_digest=digest,
        ledger_head_at_start=run.record["ledger_head_at_start"],
        key=signer,
        ledger=None if options.dry_run else ledger,
    )
    chained = "ledger entry appended" if not options.dry_run else "dry run: not appended to the ledger"
    say(f"signed bundle: {bundle.n_files} files, key {bundle.fingerprint}; {chained}")
    return ReproduceResult(
        run.path,
        run.run_id,
        analysis.get("headline", {}),
        list(analysis.get("failed_controls", [])),
        bundle.fingerprint,
    )

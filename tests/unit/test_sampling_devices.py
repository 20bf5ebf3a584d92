"""The transformers sampler on logits that live on another device than the CPU (issue 37, finding 1).

On a GPU, `torch.multinomial(cuda_probs, 1, generator=cpu_generator)` raises "Expected a 'cuda'
device type for generator but found 'cpu'": every sampled transformers arm of the GPU plan crashed
at its first token, and the CPU rehearsal could not see it, since there every tensor is on the CPU.
These tests put the logits on the `meta` device, standing for an accelerator, under a
TorchFunctionMode that applies CUDA's two device rules (a function given a generator gets tensors
on the generator's device; no op mixes tensors of two devices) and simulates the copies from the
accelerator to the CPU (a meta tensor holds no data: the copy yields positive weights and ascending
token ids). The sampler of 8f9ed09 fails them; the rule itself is tested on that sampler's draw.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from capsule.generation.backends.hf_sampling import PerRowSampler, draw, support
from capsule.prereg.plan import Decoding

#: The GPU plan's sampled arms (prereg/agents-a1-4b-v3: runs 3a/3b): T 0.85, top_p 0.95, top_k 20,
#: presence penalty 1.1; and the same with a repetition penalty, whose mask is built from positions.
CARD = Decoding("sample", 0.85, 0.95, 20, 0.0, 1.1, 1.0)
REPETITION = dataclasses.replace(CARD, repetition_penalty=1.05)
WHOLE_VOCABULARY = dataclasses.replace(CARD, top_k=0)
ACCELERATOR = torch.device("meta")


def _target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[torch.device | None, torch.dtype | None]:
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args[1:]:
        if isinstance(arg, (str, torch.device)):
            device = torch.device(arg)
        elif isinstance(arg, torch.dtype):
            dtype = arg
    return (torch.device(device) if device is not None else None), dtype


class AcceleratorRules(TorchFunctionMode):
    """CUDA's device rules, applied to the meta device (see the module docstring)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        tensors = [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
        generator = kwargs.get("generator")
        for tensor in tensors:
            if isinstance(generator, torch.Generator) and tensor.device != generator.device:
                raise RuntimeError(
                    f"Expected a '{tensor.device.type}' device type for generator but found "
                    f"'{generator.device.type}'"
                )
        if func in (torch.Tensor.to, torch.Tensor.cpu) and args[0].device == ACCELERATOR:
            device, dtype = (torch.device("cpu"), None) if func is torch.Tensor.cpu else _target(args, kwargs)
            if device is not None and device.type == "cpu":
                return self._copied(args[0], dtype or args[0].dtype)
        devices = {tensor.device for tensor in tensors if tensor.dim() > 0}
        if len(devices) > 1:
            found = sorted(map(str, devices))
            raise RuntimeError(f"Expected all tensors to be on the same device, but found {found}")
        return func(*args, **kwargs)

    @staticmethod
    def _copied(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """What a copy to the CPU brings back here: ascending ids, or equal positive weights."""
        if dtype.is_floating_point:
            return torch.ones(tensor.shape, dtype=dtype)
        return torch.arange(tensor.numel(), dtype=dtype).reshape(tensor.shape)


def _on_accelerator(decoding: Decoding, rows: int = 3, vocab: int = 64) -> torch.Tensor:
    sampler = PerRowSampler(decoding, [11 * row + 1 for row in range(rows)], [1] * rows, prompt_len=4)
    assert all(g.device.type == "cpu" for g in sampler.generators)  # every stream is a CPU generator's
    input_ids = torch.zeros(rows, 6, dtype=torch.long, device=ACCELERATOR)
    scores = torch.zeros(rows, vocab, device=ACCELERATOR)
    with AcceleratorRules():
        return sampler(input_ids, scores)


@pytest.mark.parametrize(
    "decoding", [CARD, REPETITION, WHOLE_VOCABULARY], ids=["card", "repetition", "no-top-k"]
)
def test_the_sampler_runs_on_logits_of_another_device(decoding: Decoding) -> None:
    out = _on_accelerator(decoding)
    assert out.device == ACCELERATOR and out.shape == (3, 64)  # the choice goes back where the logits are


def test_the_rule_refuses_a_cpu_generator_on_accelerator_tensors() -> None:
    """The check the old sampler fails: its multinomial draw on the logits' device with a CPU generator."""
    probs = torch.full((8,), 0.125, device=ACCELERATOR)
    with AcceleratorRules(), pytest.raises(RuntimeError, match="Expected a 'meta' device type for generator"):
        torch.multinomial(probs, 1, generator=torch.Generator())


def test_a_row_draws_one_uniform_per_step_whatever_its_support() -> None:
    probs = torch.tensor([0.1, 0.0, 0.6, 0.3])
    for top_k in (0, 2, 3):
        drawing, counting = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
        for _ in range(5):
            draw(*support(probs, top_k), drawing)
            torch.rand((), generator=counting, dtype=torch.float64)
        assert torch.equal(drawing.get_state(), counting.get_state())


def test_the_draw_follows_the_probabilities_and_never_picks_a_zero() -> None:
    probs = torch.tensor([0.1, 0.0, 0.6, 0.3])
    generator = torch.Generator().manual_seed(3)
    picks = [draw(*support(probs, 0), generator) for _ in range(3000)]
    assert 1 not in picks
    assert abs(picks.count(2) / len(picks) - 0.6) < 0.04
    tokens, weights = support(probs, 2)
    assert tokens.tolist() == [2, 3] and weights.dtype == torch.float64  # top_k: ascending ids, float64

"""Sampling for the transformers backend with one random stream per row (a logits processor).

transformers' own sampling draws from torch's global generator, so a row's tokens would depend on
its neighbours' draws. Instead, `generate` runs in greedy mode and this processor does the whole
sampling step itself and leaves only the chosen token finite, so greedy "argmax" picks it. Each row
owns a CPU `torch.Generator` seeded from (arm seed, prompt key) and draws exactly one uniform number
per step, so its random stream never depends on the batch; only the logits themselves can
(through batch-dependent numerics, which is what the batch-size controls measure).

Devices. The penalties and filters run on the device of the logits (a GPU's, in the study); each
row's surviving tokens (at most top_k of them, else the whole vocabulary), in ascending token order,
then move to the CPU as float64 and the token is chosen there by the inverse CDF of that uniform.
So a generator never meets a tensor on another device (CUDA refuses a CPU generator for
`torch.multinomial` on CUDA tensors, which crashed every sampled transformers arm at its first token),
and a row's draw is the same on every device given the same probabilities: the stream is the CPU
generator's, and the CDF is summed in one order on the CPU. What still differs between devices is
the probabilities themselves (the logits' numerics), as for greedy decoding.

Order of operations follows vLLM's sampler: repetition penalty (prompt and generated tokens, padding
excluded) and presence penalty (generated tokens only, additive), then temperature, min_p, top_k,
top_p, and a multinomial draw over float32 probabilities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from capsule.prereg.plan import Decoding

METHOD = (
    "per-row CPU torch.Generator seeded with capsule.generation.batching.request_seed(arm seed, key); one "
    "torch.rand uniform per row per step in a logits processor, the token chosen on the CPU by the "
    "inverse CDF (float64, ascending token order) of the filtered probabilities; order: repetition "
    "penalty, presence penalty, temperature, min_p, top_k, top_p (vLLM order); float32 on the logits' device"
)


def support(probs: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One row's candidate tokens and their probabilities, on the CPU (token ids ascending; weights
    float64): the top_k highest where top_k limits them, else the whole vocabulary. Only these cross
    from the logits' device, so a GPU sends top_k numbers per row per step, not the vocabulary."""
    if 0 < top_k < probs.shape[-1]:
        weights, tokens = probs.topk(top_k)
        order = tokens.argsort()
        tokens, weights = tokens[order], weights[order]
    else:
        tokens = torch.arange(probs.shape[-1], device=probs.device)
        weights = probs
    return tokens.to("cpu"), weights.to("cpu", torch.float64)


def draw(tokens: torch.Tensor, weights: torch.Tensor, generator: torch.Generator) -> int:
    """The token whose interval of the CDF of `weights` holds one uniform draw of `generator` (all on
    the CPU): one random number per row per step, whatever the batch, the device or the vocabulary."""
    cdf = weights.cumsum(0)
    target = torch.rand((), generator=generator, dtype=torch.float64) * cdf[-1]
    position = int(torch.searchsorted(cdf, target.reshape(1), right=True).clamp(max=cdf.shape[0] - 1))
    return int(tokens[position])


class PerRowSampler:
    """A transformers LogitsProcessor that samples each row from its own generator."""

    def __init__(self, decoding: Decoding, seeds: list[int], pad_lengths: list[int], prompt_len: int) -> None:
        self.decoding = decoding
        self.generators = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]
        self.pad_lengths = torch.tensor(pad_lengths).unsqueeze(1)
        self.prompt_len = prompt_len

    def _penalties(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        d = self.decoding
        if d.repetition_penalty != 1.0:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            valid = (positions >= self.pad_lengths.to(input_ids.device)).to(scores.dtype)
            seen = torch.zeros_like(scores).scatter_add_(1, input_ids, valid) > 0
            penalized = torch.where(scores > 0, scores / d.repetition_penalty, scores * d.repetition_penalty)
            scores = torch.where(seen, penalized, scores)
        if d.presence_penalty != 0.0 and input_ids.shape[1] > self.prompt_len:
            generated = input_ids[:, self.prompt_len :]
            present = torch.zeros_like(scores).scatter_(1, generated, 1.0)
            scores = scores - d.presence_penalty * present
        return scores

    def _filter(self, scores: torch.Tensor) -> torch.Tensor:
        d = self.decoding
        scores = scores / d.temperature
        if d.min_p > 0.0:
            probs = scores.softmax(dim=-1)
            threshold = d.min_p * probs.max(dim=-1, keepdim=True).values
            scores = scores.masked_fill(probs < threshold, float("-inf"))
        if d.top_k > 0 and d.top_k < scores.shape[-1]:
            kth = scores.topk(d.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if d.top_p < 1.0:
            sorted_scores, order = scores.sort(dim=-1, descending=True)
            cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            drop_sorted = (cumulative - sorted_scores.softmax(dim=-1)) >= d.top_p  # keep the token crossing p
            drop = torch.zeros_like(drop_sorted).scatter_(1, order, drop_sorted)
            scores = scores.masked_fill(drop, float("-inf"))
        return scores

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = self._filter(self._penalties(input_ids, scores.float()))
        probs = scores.softmax(dim=-1)
        top_k = self.decoding.top_k
        tokens = [draw(*support(probs[i], top_k), g) for i, g in enumerate(self.generators)]
        chosen = torch.tensor(tokens, dtype=torch.long, device=scores.device).unsqueeze(1)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, chosen, 0.0)


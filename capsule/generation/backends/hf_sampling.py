"""Sampling for the transformers backend with one random stream per row (a logits processor).

transformers' own sampling draws from torch's global generator, so a row's tokens would depend on
its neighbours' draws. Instead, `generate` runs in greedy mode and this processor does the whole
sampling step itself and leaves only the chosen token finite, so greedy "argmax" picks it. Each row
owns a `torch.Generator` seeded from (arm seed, prompt key) and draws exactly one multinomial
sample per step, so its random stream never depends on the batch; only the logits themselves can
(through batch-dependent numerics, which is what the batch-size controls measure).

Order of operations follows vLLM's sampler: repetition penalty (prompt and generated tokens, padding
excluded) and presence penalty (generated tokens only, additive), then temperature, min_p, top_k,
top_p, and a multinomial draw over float32 probabilities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from capsule.prereg.plan import Decoding

METHOD = (
    "per-row torch.Generator seeded with capsule.generation.batching.request_seed(arm seed, key); one "
    "torch.multinomial draw per row per step in a logits processor; order: repetition penalty, "
    "presence penalty, temperature, min_p, top_k, top_p (vLLM order); float32"
)


class PerRowSampler:
    """A transformers LogitsProcessor that samples each row from its own generator."""

    def __init__(self, decoding: Decoding, seeds: list[int], pad_lengths: list[int], prompt_len: int) -> None:
        self.decoding = decoding
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.pad_lengths = torch.tensor(pad_lengths).unsqueeze(1)
        self.prompt_len = prompt_len

    def _penalties(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        d = self.decoding
        if d.repetition_penalty != 1.0:
            positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
            valid = (positions >= self.pad_lengths).to(scores.dtype)
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
        chosen = torch.stack(
            [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)]
        )
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, chosen, 0.0)


def describe_sampling(decoding: Decoding) -> dict[str, Any]:
    """How randomness enters an hf arm: recorded in the backend's describe()."""
    if decoding.mode == "greedy":
        return {"mode": "greedy", "method": "argmax (transformers greedy search, no processors)"}
    return {"mode": "sample", "method": METHOD}

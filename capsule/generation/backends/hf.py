"""The transformers backend: `generate` on fixed static batches, left padding, declared dtype.

One call completes exactly one formed batch (scope "batch"), under `torch.inference_mode()`. Rows
are left-padded to the longest prompt; generated ids are cut after the first stop token. Greedy is
transformers' greedy search with no logits processors; sampling uses `hf_sampling.PerRowSampler`
(one random stream per row). Out of memory is raised as such, with the batch size.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from capsule.errors import BadInputError
from capsule.generation.backends import (
    BackendContext,
    BackendOutOfMemoryError,
    Completion,
    DoneCallback,
    Request,
    arm_options,
)
from capsule.generation.backends.arm_env import ArmEnv
from capsule.generation.backends.checkpoint import resolve_loader
from capsule.generation.chat import stop_token_ids
from capsule.generation.refusals import BackendRefusedError
from capsule.jsonio import read_json_object
from capsule.prereg.backend_specs import MODEL_LOADERS, SPECS, HFOptions
from capsule.prereg.backend_types import Scope, cuda_index
from capsule.prereg.engine_sharing import reuse_key

if TYPE_CHECKING:
    from capsule.prereg.plan import Arm, Decoding


def _is_oom(error: BaseException) -> bool:
    text = str(error).lower()
    return type(error).__name__ == "OutOfMemoryError" or "out of memory" in text or "can't allocate" in text


def _cpu_or_refuse(arm: str) -> str:
    """"cpu" for an arm with no device set on a host whose torch sees no CUDA device, unless NVML lists
    a GPU here: then torch cannot use it (a driver older than the torch build, most often) and the arm
    would run on the CPU for a study of days: BadInputError (exit 2) naming the driver needed."""
    from capsule.machine.gpu import driver_problem, probe_gpus
    from capsule.machine.software import torch_build

    listed = probe_gpus()
    if not listed["gpus"]:
        return "cpu"
    build = torch_build()
    why = driver_problem(listed["gpu_system"].get("cuda_driver_version"), build["cuda"] if build else None)
    names = ", ".join(str(gpu.get("name")) for gpu in listed["gpus"])
    raise BadInputError(
        f"arm {arm}: this host has {names} but torch sees no CUDA device "
        f"({why or 'torch is not a CUDA build, or CUDA failed to initialise'}); refusing to run it on the "
        "CPU (set backend_options device = \"cpu\" in a plan meant for the CPU); `capsule doctor --plan` "
        "says what is missing"
    )


def _absent_device(device: str | None, torch: Any) -> str:
    """Why an arm's explicit `device` ("cuda:1") is not on this host ("" when it is, or none is set):
    a cross-device control's second arm on a one-GPU host is refused, not a crash."""
    index = cuda_index(device)
    if index is None:
        return ""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if index < count:
        return ""
    return f"device {device} is absent: this host has {count} CUDA device(s)"


class HFBackend:
    """A transformers model loaded once with the plan's [model] loader class; batch size and
    decoding are given per call. `loader` None (no plan): the class config.json calls for."""

    name = "hf"
    scope: Scope = SPECS["hf"].scope

    def __init__(
        self, model_dir: Path, arm: Arm, loader: str | None = None, context: BackendContext | None = None
    ) -> None:
        self.loaded_for = reuse_key(arm)
        self.options = arm_options(self.name, arm, HFOptions)
        self.loader = resolve_loader(model_dir, loader)  # refuses a plan/config.json mismatch
        self.auto_class = MODEL_LOADERS[self.loader]
        self._env = ArmEnv(arm.env)  # before torch initialises its threads and any CUDA context
        import torch
        import transformers

        absent = _absent_device(self.options.device, torch)
        if absent:
            self._env.restore()
            raise BackendRefusedError(arm.name, self.name, absent)

        device = self.options.device or ("cuda" if torch.cuda.is_available() else None)
        if device is None:
            try:
                device = _cpu_or_refuse(arm.name)  # before the weights load, not after
            except BadInputError:
                self._env.restore()
                raise
        self.dtype_name = arm.dtype
        self.torch_dtype = getattr(torch, arm.dtype)
        self.model_dir = model_dir
        self.stop_ids = stop_token_ids(model_dir)
        self.pad_id = self._pad_id(model_dir)
        try:
            self.model: Any = getattr(transformers, self.auto_class).from_pretrained(
                str(model_dir),
                dtype=self.torch_dtype,
                attn_implementation=self.options.attn_implementation,
            )
            self.model.to(device)
        except (RuntimeError, MemoryError) as error:
            self._env.restore()
            if _is_oom(error):
                raise BackendOutOfMemoryError(f"out of memory loading {model_dir} in {arm.dtype}") from error
            raise
        self.model.eval()
        self._versions = {"torch": torch.__version__, "transformers": transformers.__version__}
        self._device = str(self.model.device)
        self._env_recorded = self._env.recorded()

    def _pad_id(self, model_dir: Path) -> int:
        path = model_dir / "generation_config.json"
        if path.exists():
            pad = read_json_object(path, "generation_config.json").get("pad_token_id")
            if isinstance(pad, int):
                return pad
        return self.stop_ids[0]

    def generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        max_new_tokens: int,
        seeds: list[int],
        on_done: DoneCallback | None = None,
    ) -> list[Completion]:
        """Generate one static batch: every request in one left-padded `model.generate` call."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        from capsule.generation.backends.hf_sampling import PerRowSampler

        width = max(len(r.input_ids) for r in requests)
        pads = [width - len(r.input_ids) for r in requests]
        ids = torch.tensor(
            [[self.pad_id] * p + list(r.input_ids) for r, p in zip(requests, pads, strict=True)]
        )
        mask = torch.tensor([[0] * p + [1] * len(r.input_ids) for r, p in zip(requests, pads, strict=True)])
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            use_cache=True,
        )
        processors = LogitsProcessorList()
        if decoding.mode == "sample":
            processors.append(PerRowSampler(decoding, seeds, pads, width))
        try:
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids.to(self.model.device),
                    attention_mask=mask.to(self.model.device),
                    generation_config=config,
                    logits_processor=processors,
                )
        except (RuntimeError, MemoryError) as error:
            if _is_oom(error):
                raise BackendOutOfMemoryError(
                    f"out of memory generating a batch of {len(requests)} (batch_size is an experimental "
                    "variable and is never reduced: declare a smaller one in a new arm, or use a bigger "
                    "machine)"
                ) from error
            raise
        completions = []
        for i, row in enumerate(out[:, width:].tolist()):
            cut = next((j for j, t in enumerate(row) if t in self.stop_ids), None)
            tokens = row if cut is None else row[: cut + 1]
            completion = Completion(tuple(tokens), "length" if cut is None else "stop")
            completions.append(completion)
            if on_done is not None:
                on_done(i, completion)
        return completions

    def describe(self) -> dict[str, Any]:
        """Versions, dtype, threads, kernels and padding: everything here that can move numerics."""
        import torch

        from capsule.generation.backends.hf_sampling import METHOD

        return {
            "backend": "hf",
            "loader": self.loader,
            "auto_class": self.auto_class,
            "versions": self._versions,
            "dtype": self.dtype_name,
            "device": self._device,
            "options": self.options.to_json(),
            "env": self._env_recorded,
            "torch_num_threads": torch.get_num_threads(),
            "torch_num_interop_threads": torch.get_num_interop_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "padding": "left",
            "pad_token_id": self.pad_id,
            "stop_token_ids": self.stop_ids,
            "batching": "static: exactly batch_size requests per generate call (last batch: the remainder)",
            "sampling_method": METHOD,
            "greedy_method": "transformers greedy search, no logits processors",
        }

    def close(self) -> None:
        """Drop the model so its memory can be reclaimed; restore the env vars the arm set."""
        import gc

        self.model = None
        gc.collect()
        self._env.restore()

"""A rehearsal's stand-in model: the plan model's architecture class, shrunk, with random weights.

`capsule reproduce --rehearse` runs a GPU plan on this CPU with a model of the plan's own architecture
class (`capsule.artifacts.stand_in_shapes`): its config shrunk to a few layers (one of each layer
type) and a small width, random weights from a fixed seed, and the embedded model's tokenizer (the
vocabulary size follows it, so every id the tokenizer makes is one the model embeds), under the
tokenizer class the plan's architecture gets (`StandInSpec.tokenizer_class`, in every directory, so
the vLLM substitute renders the same ids). The chat
template is the embedded model's ChatML with the thinking switch Qwen-style templates have
(`STAND_IN_CHAT_TEMPLATE`): the plan's own template is not here, and its thinking arms need one.

Each stand-in is built once into the capsule cache (`<cache>/stand-ins/<name>-<digest>/`), in a
temporary sibling renamed into place, with a `capsule-model.json` recording every file's sha256, its
shape and its source (kind `STAND_IN_KIND`), so the run's manifest names it and the report says the
run is a rehearsal. A cached directory that fails verification is set aside and rebuilt.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from capsule.artifacts.cache import cache_dir, ensure_private_dir, set_aside
from capsule.artifacts.embedded_model import (
    MODEL_RECORD,
    fetch_model,
    hash_model_files,
    tree_digest,
    verify_model_dir,
)
from capsule.artifacts.stand_in_shapes import STAND_INS, VLLM_BACKENDS, ArchitectureShape, StandInSpec
from capsule.atomic import write_json_atomic, write_text_atomic
from capsule.errors import BadInputError, VerificationError
from capsule.hashing import sha256_json
from capsule.jsonio import read_json_object
from capsule.prereg.plan import Model

STAND_IN_KIND = "rehearsal-stand-in"  # capsule-model.json `source.kind` of a stand-in directory
STAND_INS_DIRNAME = "stand-ins"
TOKENIZER_FILE = "tokenizer.json"  # copied from the embedded model
TOKENIZER_CONFIG = "tokenizer_config.json"  # the embedded model's, naming the spec's tokenizer class
# ChatML as the embedded template renders it, plus the switch Qwen-style templates read: thinking
# off closes an empty reasoning block; on (or unset, as a chat request leaves it) opens the answer.
STAND_IN_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)


@dataclass(frozen=True)
class StandIn:
    """A built stand-in: the directory the plan's own architecture runs from, the one the vLLM
    backends run from (the same directory when no substitute is declared), and the declaration."""

    spec: StandInSpec
    model_dir: Path
    vllm_dir: Path

    def describe(self) -> dict[str, Any]:
        """What a rehearsal record says about its model (both directories' records, and why)."""
        return {
            "for_model": self.spec.model,
            "config_source": self.spec.config_source,
            "seed": self.spec.seed,
            "model": read_json_object(self.model_dir / MODEL_RECORD, "stand-in record"),
            "vllm_model": read_json_object(self.vllm_dir / MODEL_RECORD, "stand-in record"),
            "vllm_substitute_why": self.spec.vllm_why if self.vllm_dir != self.model_dir else "",
        }


def stand_in_spec(model: Model) -> StandInSpec:
    """The declared stand-in for a plan's model (BadInputError if none is declared)."""
    spec = STAND_INS.get(model.repo or model.name)
    if spec is None:
        known = ", ".join(sorted(STAND_INS))
        raise BadInputError(
            f"no rehearsal stand-in is declared for model {model.repo or model.name!r} (known: {known}); "
            "declare its architecture's shrunk shape in capsule/artifacts/stand_in_shapes.py"
        )
    return spec


def _tokens(embedded: Path) -> dict[str, Any]:
    """The embedded tokenizer's vocabulary size and special token ids, which the stand-in adopts."""
    config = read_json_object(embedded / "config.json", "embedded model config.json")
    generation = read_json_object(embedded / "generation_config.json", "embedded generation_config.json")
    return {
        "vocab_size": int(config["vocab_size"]),
        "bos_token_id": generation.get("bos_token_id"),
        "eos_token_id": generation["eos_token_id"],
        "pad_token_id": generation.get("pad_token_id", generation["eos_token_id"]),
    }


def stand_in_config(shape: ArchitectureShape, tokens: dict[str, Any]) -> Any:
    """The transformers config of `shape` with the tokenizer's `tokens` (vocabulary, special ids).
    A multimodal class's image and video placeholder ids are put past the vocabulary: text-only
    prompts never contain them."""
    import transformers

    config_class = getattr(transformers, shape.config_class)
    text = {**shape.text, **tokens}
    if shape.vision is None:
        config = config_class(**text)
    else:
        past = int(tokens["vocab_size"])
        config = config_class(
            text_config=text, vision_config=dict(shape.vision), image_token_id=past, video_token_id=past + 1,
            vision_start_token_id=past + 2, vision_end_token_id=past + 3,
        )
    config.architectures = [shape.architecture]
    return config


def _digest(spec: StandInSpec, shape: ArchitectureShape, embedded_digest: str) -> str:
    import torch
    import transformers

    return sha256_json({
        "shape": asdict(shape), "seed": spec.seed, "template": STAND_IN_CHAT_TEMPLATE,
        "tokenizer_class": spec.tokenizer_class, "substitute": _substitute(spec, shape),
        "tokenizer_tree": embedded_digest, "torch": torch.__version__,
        "transformers": transformers.__version__,
    })[:16]


def _substitute(spec: StandInSpec, shape: ArchitectureShape) -> dict[str, str] | None:
    """For the plan architecture's directory: the substitute the vLLM backends run instead, and why."""
    if spec.vllm_shape is None or shape != spec.shape:
        return None
    return {"architecture": spec.vllm_shape.architecture, "backends": ", ".join(VLLM_BACKENDS),
            "why": spec.vllm_why}


def _write(shape: ArchitectureShape, spec: StandInSpec, embedded: Path, out: Path) -> None:
    """Build `shape` with random weights (seeded) into `out`, with the tokenizer, template, record."""
    import torch
    import transformers

    from capsule.prereg.backend_specs import MODEL_LOADERS

    tokens = _tokens(embedded)
    config = stand_in_config(shape, tokens)
    auto = getattr(transformers, MODEL_LOADERS[shape.loader])
    torch.manual_seed(spec.seed)
    model = auto.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(str(out))
    shutil.copyfile(embedded / TOKENIZER_FILE, out / TOKENIZER_FILE)
    tokenizer_config = read_json_object(embedded / TOKENIZER_CONFIG, "embedded tokenizer_config.json")
    write_json_atomic(out / TOKENIZER_CONFIG, {**tokenizer_config, "tokenizer_class": spec.tokenizer_class})
    write_text_atomic(out / "chat_template.jinja", STAND_IN_CHAT_TEMPLATE)
    generation = {key: tokens[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
    write_json_atomic(out / "generation_config.json", generation)
    files = hash_model_files(out)
    write_json_atomic(out / MODEL_RECORD, {
        "name": f"stand-in {shape.architecture} for {spec.model}",
        "source": {
            "kind": STAND_IN_KIND,
            "architecture": shape.architecture,
            "for_model": spec.model,
            "note": (
                f"random weights (seed {spec.seed}), shrunk config, the embedded model's tokenizer: "
                "a rehearsal model, its outputs are noise"
            ),
            "config_source": spec.config_source,
            "vllm_substitute": _substitute(spec, shape),
        },
        "files": files,
        "tree_digest": tree_digest(files),
    })


def _built(shape: ArchitectureShape, spec: StandInSpec, embedded: Path, root: Path) -> Path:
    """The verified cached directory of `shape`, built once."""
    embedded_digest = str(read_json_object(embedded / MODEL_RECORD, "embedded model record")["tree_digest"])
    directory = root / f"{shape.architecture.lower()}-{_digest(spec, shape, embedded_digest)}"
    if directory.exists():
        try:
            verify_model_dir(directory)
            return directory
        except (VerificationError, BadInputError):
            set_aside(directory)
    scratch = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=root))
    try:
        _write(shape, spec, embedded, scratch)
        scratch.rename(directory)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return directory


def build_stand_in(spec: StandInSpec, root: Path | None = None) -> StandIn:
    """Build (once) and return the stand-in directories of `spec` under `root` (default: the cache)."""
    base = ensure_private_dir(root if root is not None else cache_dir() / STAND_INS_DIRNAME)
    embedded, _source = fetch_model()
    model_dir = _built(spec.shape, spec, embedded, base)
    vllm_dir = _built(spec.vllm_shape, spec, embedded, base) if spec.vllm_shape else model_dir
    return StandIn(spec, model_dir, vllm_dir)


def substitution_note(model_record: Any) -> str:
    """One sentence on the substitute a stand-in's vLLM backends ran on ("" when there was none)."""
    source = model_record.get("source") if isinstance(model_record, dict) else None
    substitute = source.get("vllm_substitute") if isinstance(source, dict) else None
    if not isinstance(substitute, dict):
        return ""
    return (
        f"The {substitute.get('backends')} arms ran on a {substitute.get('architecture')} stand-in "
        f"instead: {substitute.get('why')}."
    )


def is_stand_in(model_record: Any) -> bool:
    """Whether a manifest's `model` section (or a capsule-model.json) describes a stand-in."""
    source = model_record.get("source") if isinstance(model_record, dict) else None
    return isinstance(source, dict) and source.get("kind") == STAND_IN_KIND

"""The model's shape, from what a user has: ``actor.path``, a Hugging Face config, a name.

The layout checks need a few sizes (layers, heads, experts, sequence length); the memory
model (:mod:`areal_conf.perf.memory`) needs the rest of the shape: hidden size, FFN size,
vocabulary, expert FFN size, router top-k, tied embeddings. A user rarely types them: an
AReaL config names the model in ``actor.path``, a local directory or a Hugging Face id.
:func:`resolve_model` reads the shape from there (the directory's ``config.json``; for an
id, the local Hugging Face cache, offline, else a table of well-known models), from
areal-conf's own ``--model`` / ``AREAL_CONF_MODEL``, and from the ``model`` section of
areal-conf's own configs (``hf_config``, a path to a ``config.json``, and sizes written
out, which win over the file's). Files are read as JSON, never through ``transformers``,
and nothing is downloaded.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from areal_conf.arguments import MAX_TOKENS, mapping, optional_whole, whole
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import Sentence, fix, sentence

# Sizes of the shape, each a positive integer or None (unknown).
SIZE_KEYS: Final = (
    "hidden_size",
    "ffn_hidden_size",
    "vocab_size",
    "head_dim",
    "moe_ffn_hidden_size",
    "moe_shared_expert_ffn_hidden_size",
    "moe_router_topk",
    "max_seq_len",
)
# Keys of the ``model`` section besides the layout keys of
# :mod:`areal_conf.spec.model_checks`: the memory model reads them (and the layout rules
# ffn_hidden_size and moe_ffn_hidden_size).
SHAPE_KEYS: Final = (*SIZE_KEYS, "tie_word_embeddings", "hf_config")

# Hugging Face config.json key -> model section key, first match wins. Covers Llama,
# Qwen2/2.5/3, Qwen-MoE (num_experts, moe_intermediate_size, shared_expert_...),
# Mixtral (num_local_experts) and DeepSeek (n_routed_experts, n_shared_experts).
HF_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "ffn_hidden_size": ("intermediate_size", "n_inner", "ffn_hidden_size"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "vocab_size": ("vocab_size",),
    "num_experts": ("num_experts", "num_local_experts", "n_routed_experts"),
    "moe_ffn_hidden_size": ("moe_intermediate_size",),
    "moe_shared_expert_ffn_hidden_size": ("shared_expert_intermediate_size",),
    "moe_router_topk": ("num_experts_per_tok", "moe_topk"),
    "max_seq_len": ("max_position_embeddings", "n_positions", "max_seq_len"),
    "tie_word_embeddings": ("tie_word_embeddings",),
}


@dataclass(frozen=True)
class ModelShape:
    """A transformer's sizes; derived defaults filled in (kv heads, head dim, top-k)."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    num_experts: int | None = None
    moe_ffn_hidden_size: int = 0
    moe_shared_expert_ffn_hidden_size: int = 0
    moe_router_topk: int = 0
    max_seq_len: int | None = None

    def __post_init__(self) -> None:
        """Every size a whole number from 1 (the ``moe_`` sizes from 0: no experts;
        ``num_experts`` and ``max_seq_len`` may be None) to :data:`MAX_MODEL_SIZE`."""
        for f in fields(self):
            value = getattr(self, f.name)
            where = f"model.{f.name}"
            if f.name == "tie_word_embeddings":
                if not isinstance(value, bool):
                    check_shape_values({f.name: value})
            elif f.name in ("num_experts", "max_seq_len"):
                optional_whole(where, value, example="e.g. 64, or None", maximum=MAX_MODEL_SIZE)
            else:
                minimum = 0 if f.name.startswith("moe_") else 1
                whole(where, value, example="e.g. 4096", minimum=minimum, maximum=MAX_MODEL_SIZE)

    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None and self.num_experts > 1


#: The largest size of a model areal-conf takes (layers, hidden size, vocabulary,
#: context, ...): the limit of tokens (:data:`areal_conf.arguments.MAX_TOKENS`, 2**40),
#: far above any model's (a context of 10M tokens is the longest today).
MAX_MODEL_SIZE: Final = MAX_TOKENS

# Keys without which there is no memory estimate (num_kv_heads, head_dim default).
REQUIRED: Final = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "ffn_hidden_size",
    "vocab_size",
)


def read_hf_config(path: str) -> dict[str, Any]:
    """The model section keys found in a Hugging Face ``config.json`` (a file or its dir).

    Multimodal configs keep the language model under ``text_config``; that part is read.
    Raises AllocationError when the file is missing or not a JSON object. A file is
    parsed once while its size and modification time stay the same.
    """
    data = _config_json(path)
    text = data.get("text_config")
    if isinstance(text, dict) and "hidden_size" not in data:
        data = {**data, **text}
    found: dict[str, Any] = {}
    for key, names in HF_KEYS.items():
        for name in names:
            value = data.get(name)
            if value is None:
                continue
            if key == "tie_word_embeddings":
                found[key] = bool(value)
            elif is_size(value):
                found[key] = value
            break
    return found


def read_quant_method(path: str) -> str:
    """The ``quantization_config.quant_method`` of a ``config.json`` (a file or its dir):
    ``"fp8"`` for FP8 weights, ``""`` for a model without one. Errors as
    :func:`read_hf_config`."""
    quantization = _config_json(path).get("quantization_config")
    method = quantization.get("quant_method") if isinstance(quantization, dict) else None
    return method if isinstance(method, str) else ""


def _config_json(path: str) -> dict[str, Any]:
    """The JSON object of ``path`` (a ``config.json`` or its directory), parsed once while
    its size and modification time stay the same."""
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        stat = os.stat(file)
    except OSError:
        stat = None
    if stat is not None:
        return _read_cached(file, stat.st_mtime_ns, stat.st_size)
    return _read(path, file)


@functools.lru_cache(maxsize=64)
def _read_cached(file: str, mtime_ns: int, size: int) -> dict[str, Any]:
    return _read(file, file)


def _read(path: str, file: str) -> dict[str, Any]:
    try:
        with open(file, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise AllocationError(
            f"model.hf_config: no file {file!r}",
            path,
            hint="give the path of the model's config.json (or of its directory), "
            "or null to use the model section alone",
        ) from None
    except (OSError, ValueError) as err:
        raise AllocationError(
            f"model.hf_config: cannot read {file!r} as JSON ({err})",
            path,
            hint="give the model's config.json as written by Hugging Face",
        ) from None
    if not isinstance(data, dict):
        raise AllocationError(
            f"model.hf_config: {file!r} holds no JSON object",
            path,
            hint="give the model's config.json as written by Hugging Face",
        )
    return data


def local_config_dir(path: object) -> str | None:
    """``path`` when it is a local directory holding a ``config.json``, else None."""
    if isinstance(path, str) and path and os.path.isfile(os.path.join(path, "config.json")):
        return path
    return None


@dataclass(frozen=True)
class ShapeSource:
    """Model-section keys read from one source, and a phrase naming it for the plan
    (``Qwen/Qwen3-8B from the Hugging Face cache``); ``keys`` is empty and ``missing`` says
    why when the source gave nothing."""

    keys: Mapping[str, Any]
    described: str = ""
    missing: str = ""
    #: The weights' ``quantization_config.quant_method`` (``"fp8"``; ``""`` for none), None
    #: when the source does not say (no source, or sizes given without a file).
    quant_method: str | None = None


def read_source(text: str, where: str) -> ShapeSource:
    """The shape a model reference gives: a ``config.json`` file or a directory holding
    one, a Hugging Face id in the local cache (read offline), or a well-known model's id.
    ``where`` names the key or option it came from; a file that is named but cannot be
    read is an AllocationError, anything else that gives no shape says so in ``missing``."""
    from areal_conf.model.hf_cache import cached_config_json
    from areal_conf.model.known_models import known_model, known_quant_method

    path = os.path.expanduser(text)
    if os.path.isfile(path) or local_config_dir(path):
        return ShapeSource(read_hf_config(path), f"{text} ({where})", "", read_quant_method(path))
    if os.path.isdir(path):
        return ShapeSource({}, missing=f"{text!r} has no config.json")
    if os.path.isabs(path) or text.startswith((".", "~")) or text.endswith(".json"):
        return ShapeSource({}, missing=f"{text!r} is not a local file or directory")
    cached = cached_config_json(text)
    if cached is not None:
        return ShapeSource(
            read_hf_config(cached),
            f"{text} from the Hugging Face cache ({where})",
            "",
            read_quant_method(cached),
        )
    known = known_model(text)
    if known is not None:
        return ShapeSource(
            known,
            f"{text} from areal-conf's table of known models ({where})",
            "",
            known_quant_method(text),
        )
    return ShapeSource(
        {},
        missing=f"{text!r} is not a local directory, not in the Hugging Face cache and not "
        "a model areal-conf knows",
    )


def merge_model(
    section: Mapping[str, Any] | None,
    actor_path: object = None,
    settings: Mapping[str, Any] | None = None,
    settings_from: str = "",
) -> dict[str, Any]:
    """The model section with its blanks filled; see :func:`resolve_model`."""
    return dict(resolve_model(section, actor_path, settings, settings_from).keys)


def resolve_model(
    section: Mapping[str, Any] | None,
    actor_path: object = None,
    settings: Mapping[str, Any] | None = None,
    settings_from: str = "",
) -> ShapeSource:
    """The model's shape from every source, the first that has a key winning:

    1. ``settings`` (areal-conf's command line or environment: model keys, ``hf_config``
       a file, directory or Hugging Face id), named ``settings_from``;
    2. the ``model`` section of areal-conf's own configs (its keys, then ``hf_config``);
    3. ``actor.path``: a local model directory, a Hugging Face id in the local cache, or
       a well-known model.

    The result has no ``hf_config`` key; ``described`` names the file or model the shape
    came from, ``missing`` why none was found.
    """
    layers: list[Mapping[str, Any]] = []
    described: list[str] = []
    missing: list[str] = []
    for given, where in ((settings, settings_from or "--model"), (section, "model.hf_config")):
        written = {k: v for k, v in (given or {}).items() if v is not None}
        source = written.pop("hf_config", None)
        if source is not None and not isinstance(source, str):
            raise _wrong_value(
                where,
                "a path or a Hugging Face id",
                source,
                "give the path of the model's config.json, "
                "e.g. model.hf_config=/models/x/config.json",
            )
        layers.append(written)
        if source:
            found = read_source(source, where)
            if found.missing:  # a source the user named explicitly must give the shape
                raise AllocationError(
                    f"{where}: {found.missing}",
                    source,
                    hint="give the path of the model's config.json (or of its directory), "
                    "or a Hugging Face id such as Qwen/Qwen3-8B",
                )
            layers.append(found.keys)
            described.append(found.described)
    if isinstance(actor_path, str) and actor_path:
        found = read_source(actor_path, "actor.path")
        layers.append(found.keys)
        described.append(found.described)
        missing.append(f"actor.path {found.missing}" if found.missing else "")
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        merged.update(layer)
    return ShapeSource(
        merged,
        next((d for d in described if d), ""),
        next((m for m in missing if m), ""),
    )


#: What a user of areal-conf's command line or of an AReaL YAML gives for the shape.
SHAPE_HINT: Final = (
    "give it with AREAL_CONF_MODEL=<the model's config.json, directory or Hugging Face id> "
    "(python -m areal_conf: --model hf_config=...)"
)


#: The sizes :func:`model_shape` reads besides :data:`SIZE_KEYS`.
_LAYOUT_SIZE_KEYS: Final = {
    "num_layers": 32,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "num_experts": 64,
}
_MODEL_EXAMPLE: Final = (
    "e.g. {'hf_config': 'Qwen/Qwen3-8B'} or {'num_layers': 36, 'hidden_size': 4096, "
    "'num_attention_heads': 32, 'ffn_hidden_size': 12288, 'vocab_size': 151936}"
)


def model_shape(model: Mapping[str, Any], hint: str = SHAPE_HINT) -> ModelShape | str:
    """The shape of a merged model section, or a sentence saying what is missing and
    ``hint`` (how to give it). A size that is not a positive integer (or null) is an
    AllocationError, as in the model section."""
    model = mapping("model", model, example=_MODEL_EXAMPLE)
    for key, example in _LAYOUT_SIZE_KEYS.items():
        check_size_value(key, model.get(key), example=example, null_means="leave it unknown")
    check_shape_values(model)
    missing = [key for key in REQUIRED if model.get(key) is None]
    if missing:
        return "model shape unknown (no " + ", ".join(missing) + "): " + hint
    heads = model["num_attention_heads"]
    hidden = model["hidden_size"]
    experts = model.get("num_experts")
    if model.get("head_dim") is None and hidden < heads:
        raise AllocationError(
            f"model.hidden_size {hidden} is smaller than model.num_attention_heads {heads}, "
            "so a head would have no dimension",
            hint="give the sizes of the model's config.json (hidden_size is heads × head_dim), "
            "or model.head_dim",
        )
    return ModelShape(
        num_layers=model["num_layers"],
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=model.get("num_kv_heads") or heads,
        head_dim=model.get("head_dim") or hidden // heads,
        ffn_hidden_size=model["ffn_hidden_size"],
        vocab_size=model["vocab_size"],
        tie_word_embeddings=model.get("tie_word_embeddings") or False,
        num_experts=experts,
        moe_ffn_hidden_size=(model.get("moe_ffn_hidden_size") or model["ffn_hidden_size"])
        if experts
        else 0,
        moe_shared_expert_ffn_hidden_size=model.get("moe_shared_expert_ffn_hidden_size") or 0,
        moe_router_topk=model.get("moe_router_topk") or (1 if experts else 0),
        max_seq_len=model.get("max_seq_len"),
    )


def shape_of(model: object) -> ModelShape:
    """``model`` as a :class:`ModelShape`: a shape already, or a mapping of the ``model``
    section's keys whose ``hf_config`` (a ``config.json``, a model directory or a Hugging
    Face id) fills the sizes it does not give; an AllocationError when the shape stays
    unknown. What every function taking a ``model`` argument reads it with."""
    if isinstance(model, ModelShape):
        return model
    if type(model) is dict and "hf_config" not in model:
        # Sizes written out: the shape depends on them alone, and rankings ask for it once
        # per layout. A value's type is in the key, as True == 1 would otherwise pass.
        try:
            return _shape_of_sizes(tuple((k, type(v), v) for k, v in model.items()))
        except TypeError:  # an unhashable value: read it below, which says what is wrong
            pass
    return _read_shape(model)


@functools.lru_cache(maxsize=64)
def _shape_of_sizes(items: tuple[tuple[Any, type, Any], ...]) -> ModelShape:
    return _read_shape({key: value for key, _, value in items})


def _read_shape(model: object) -> ModelShape:
    shape = model_shape(merge_model(mapping("model", model, example=_MODEL_EXAMPLE)))
    if isinstance(shape, str):
        raise ConfigError(
            shape,
            hint="give at least num_layers, hidden_size, num_attention_heads, "
            "ffn_hidden_size and vocab_size, or hf_config=<config.json, directory or "
            "Hugging Face id>",
        )
    return shape


def is_size(value: object) -> bool:
    """A positive int; a bool is no size (``True`` would pass as 1)."""
    return type(value) is int and value > 0


def check_size_value(key: str, value: object, *, example: int, null_means: str) -> None:
    """Raise AllocationError unless ``model.<key>`` is a positive integer or None.

    Every numeric key of the ``model`` section is checked here, so they all say the
    same; ``example`` and ``null_means`` (what null does for this key) make the hint.
    """
    if value is not None and not is_size(value):
        raise _wrong_value(
            f"model.{key}",
            "a positive integer or null",
            value,
            sentence("write e.g. ", fix(f"model.{key}={example}"), f", or null to {null_means}"),
        )


def check_shape_values(section: Mapping[str, Any]) -> None:
    """Reject a shape key whose value is not a positive integer (a bool for tie_...)."""
    for key in SIZE_KEYS:
        check_size_value(
            key, section.get(key), example=4096, null_means="take it from model.hf_config"
        )
    tie = section.get("tie_word_embeddings")
    if tie is not None and not isinstance(tie, bool):
        raise _wrong_value(
            "model.tie_word_embeddings",
            "true, false or null",
            tie,
            "write model.tie_word_embeddings=true when the output layer shares the "
            "embedding matrix",
        )


def _wrong_value(where: str, must: str, value: object, hint: str | Sentence) -> AllocationError:
    """The error of a ``model`` value (or ``--model`` setting) of the wrong kind: the
    value as written, what it must be, and the fix."""
    return AllocationError(f"{where} must be {must}, got {value!r}", value, hint=hint)

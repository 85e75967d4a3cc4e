"""The shapes of well-known models, by Hugging Face id, for when ``config.json`` is not at hand.

The table is data, ``areal_conf/data/known_models.toml``: the networks (``[shapes.*]``)
and the models that name one, with the keys where a model differs from its network
(``[models."org/name"]``). This module reads it, once, and says where its numbers come
from.

An AReaL config names its model in ``actor.path``; when that is a Hub id such as
``Qwen/Qwen3-8B`` that is neither a local directory nor in the local Hugging Face cache,
areal-conf looks the id up here instead of downloading anything. Each entry holds the
keys of the ``model`` section (the names of :data:`areal_conf.model.shape.HF_KEYS`) with
the values the model's own ``config.json`` states, mapped the same way ``config.json`` is
read: ``num_hidden_layers`` -> ``num_layers``, ``intermediate_size`` ->
``ffn_hidden_size``, ``num_key_value_heads`` -> ``num_kv_heads``,
``max_position_embeddings`` -> ``max_seq_len``, ``num_experts`` / ``num_local_experts`` /
``n_routed_experts`` -> ``num_experts``, ``num_experts_per_tok`` -> ``moe_router_topk``,
``moe_intermediate_size`` -> ``moe_ffn_hidden_size``, ``shared_expert_intermediate_size``
-> ``moe_shared_expert_ffn_hidden_size``. ``head_dim`` is given only where the
``config.json`` states it (Qwen3, Qwen3.5/3.6, Llama 3.2); elsewhere it is left to
default to ``hidden_size / num_attention_heads``. ``tie_word_embeddings`` is given for
every entry (``false`` where the file leaves it out, which is the Llama and Mixtral
default).

A vision-language model (Qwen2.5-VL, Qwen3.5/3.6) has the keys of its language model:
the ``text_config`` of its ``config.json``, or the top-level keys where the file keeps
them there (Qwen2.5-VL), read the same way as the file is. That is the network whose
layers, heads and experts AReaL's engines shard. The vision tower is not in the entry,
so the memory estimate counts neither its weights (with their gradients and optimizer
state) nor its activations.

Qwen3.5-35B-A3B and Qwen3.6-35B-A3B are hybrid: of their 40 layers, every fourth has
gated full attention (16 query heads, 2 key-value heads, ``head_dim`` 256, the ones the
entry describes) and the other 30 a Gated DeltaNet linear attention (16 key and 32
value heads of 128, ``linear_*`` keys) that keeps a fixed recurrent state per sequence
instead of a KV cache. The shape keys cannot say which layers are which: the layout
rules see the full-attention heads (the stricter bound on tp), the memory model counts
every layer's token mixer as that attention (about 0.5B parameters fewer than the
DeltaNet projections hold, 1.5% of the model) and K and V on all 40 layers (four times
the KV cache per token the 10 attention layers keep), and it does not count the
recurrent state. Their multi-token-prediction layer (``mtp_num_hidden_layers: 1``) is
not counted either. The dense hybrids are left out of the table: there the DeltaNet
projections are a tenth of the model (Qwen3.6-27B: 24.4B counted against its 27B), too
much for an estimate that means to be within a few percent.

Qwen3-1.7B-FP8 stores its linear weights in FP8 (blocks of 128); Qwen's FP8 releases
keep the bf16 model's ``config.json`` and add a ``quantization_config`` (compare the
Qwen3-32B and Qwen3-30B-A3B pairs below), so it has Qwen3-1.7B's entry. The memory
model counts its weights at the engine's ``dtype``, as for any other checkpoint.
DeepSeek-V3, V3-Base and R1 are released in FP8 only (the DeepSeek-V3 README: "Since FP8
training is natively adopted in our framework, we only provide FP8 weights"; their
``config.json`` has ``quantization_config`` with ``quant_method: fp8`` and 128×128
blocks). The data file says ``quant_method = "fp8"`` for these four, which AReaL's
Megatron engine requires of a model it trains in FP8; every other entry's
``config.json`` has no ``quantization_config``.

Four entries go beyond a literal copy, each marked in the data file:

* DeepSeek-V3 / R1 state ``n_shared_experts: 1`` with ``moe_intermediate_size: 2048``;
  ``moe_shared_expert_ffn_hidden_size`` is their product, 2048. The first three of the 61
  layers are dense (``first_k_dense_replace: 3``) and attention is MLA; the memory model
  counts every layer as MoE and the attention as plain multi-head attention.
* Mixtral states no ``moe_intermediate_size``: its experts are ``intermediate_size``
  wide, so ``moe_ffn_hidden_size`` repeats that value.
* Qwen3-Coder-30B-A3B-Instruct states ``shared_expert_intermediate_size: 0`` (no shared
  expert); the key is left out, as reading its ``config.json`` leaves it out.
* Qwen3.5-35B-A3B and Qwen3.6-35B-A3B state no ``intermediate_size`` (every layer is
  MoE, ``mlp_only_layers`` is empty); ``ffn_hidden_size`` repeats
  ``moe_intermediate_size`` (512), as slime's Megatron arguments for the model do
  (``--ffn-hidden-size 512``). areal-conf reads ``ffn_hidden_size`` of an MoE model for
  no rule and no term of the estimate; it is there because every entry has it.

Where the numbers come from (each family checked against at least two of these):

* Qwen2.5 (base and Instruct): ``pytorch/torchtune``
  ``torchtune/models/qwen2_5/_model_builders.py`` (per-variant sizes, context and tied
  embeddings, base and Instruct apart); ``Lightning-AI/litgpt`` ``litgpt/config.py``;
  verbatim ``config.json`` copies in ``citsjtu2020/LLM-Prof`` ``sglang/Model_Config.md``
  (Qwen2.5-3B, 7B, 14B, 32B) and ``mlc-ai/mlc-llm``
  ``python/mlc_llm/model/model_preset.py`` (Qwen2.5-3B-Instruct); tied embeddings per
  size in Table 1 of the Qwen2.5 technical report (arXiv 2412.15115).
* Qwen2.5-Coder-7B/32B-Instruct: ``Lightning-AI/litgpt`` ``litgpt/config.py``; the
  size table (tied embeddings) of https://qwenlm.github.io/blog/qwen2.5-coder-family/;
  context length 32768 in Xinference's model docs (``qwen2.5-coder-instruct``).
* Qwen3 dense and MoE: verbatim ``config.json`` copies in ``ai-dynamo/aiconfigurator``
  ``aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-*_config.json`` and
  ``citsjtu2020/LLM-Prof`` ``sglang/Model_Config.md``; the ``-Base`` variants from
  ``pytorch/torchtune`` ``torchtune/models/qwen3/_model_builders.py`` and the verbatim
  Qwen3-8B-Base ``config.json`` in ``Chen-Oliver/qwen3-8b-base`` ``config.json``.
* Qwen3-Coder-30B-A3B-Instruct: verbatim ``config.json`` in ``ztxz16/fastllm``
  ``Qwen3-Coder-30B-A3B-Instruct/config.json``, checked against the model card beside it
  (48 layers, 32 query and 4 key-value heads, 128 experts with 8 active, 262,144 tokens).
* Llama 3, 3.1, 3.2, 3.3: verbatim ``config.json`` copies in ``ai-dynamo/aiconfigurator``
  (``meta-llama--Meta-Llama-3.1-{8B,70B,405B}_config.json``), ``mlc-ai/mlc-llm``
  ``python/mlc_llm/model/model_preset.py`` (3.1-8B/70B-Instruct, 3.2-1B/3B-Instruct),
  ``MatthewGoldsberry/LLM-Projects`` ``Llama-3.2-1B/config.json``,
  ``citsjtu2020/LLM-Prof`` ``sglang/Model_Config.md`` (3.1-8B, 3.2-3B) and
  ``scaleapi/llm-engine`` ``model-engine/tests/unit/domain/test_llm_use_cases.py``
  (Meta-Llama-3-8B/70B); ``oumi-ai/oumi`` ``configs/recipes/llama3_1/README.md`` and
  ``configs/recipes/llama3_3/README.md``; ``Lightning-AI/litgpt`` ``litgpt/config.py``.
* Qwen2-1.5B-Instruct: ``pytorch/torchtune`` ``torchtune/models/qwen2/_model_builders.py``
  (``qwen2_1_5b``, built from Qwen/Qwen2-1.5B-Instruct, tied embeddings); the verbatim
  ``config.json`` copy https://huggingface.co/unsloth/Qwen2-1.5B-Instruct/blob/main/config.json.
  Its sizes are Qwen2.5-1.5B's.
* Qwen2.5-Math-1.5B: ``Lightning-AI/litgpt`` ``litgpt/config.py`` (``Qwen2.5-Math-1.5B``,
  4096 positions); the verbatim ``config.json`` copies
  https://huggingface.co/unsloth/Qwen2.5-Math-1.5B/blob/main/config.json (named
  ``Qwen/Qwen2.5-Math-1.5B``) and
  https://huggingface.co/mlx-community/Qwen2.5-Math-1.5B-bf16/blob/main/config.json
  (4096 positions, tied embeddings).
* DeepSeek-R1-Distill-Qwen-1.5B: the verbatim ``config.json`` copies
  https://huggingface.co/onnx-community/DeepSeek-R1-Distill-Qwen-1.5B-ONNX/blob/main/config.json
  and https://huggingface.co/qeternity/DeepSeek-R1-Distill-Qwen-1.5B-FP8/blob/main/config.json
  (both named ``deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B``): Qwen2.5-1.5B's sizes,
  131072 positions and untied embeddings, unlike Qwen2.5-Math-1.5B it was distilled
  into.
* Qwen2.5-VL-3B-Instruct: the verbatim ``config.json`` copies
  https://huggingface.co/dahwinsingularity/vllm2/blob/main/config.json (named
  ``Qwen/Qwen2.5-VL-3B-Instruct``) and
  https://huggingface.co/zyoNoob/Qwen2.5-VL-3B-Instruct-AWQ/blob/main/config.json
  (made from a snapshot of ``Qwen/Qwen2.5-VL-3B-Instruct``): the language model is
  Qwen2.5-3B's (36 layers, 2048, 11008, 16/2 heads, tied), with 128000 positions, the
  context length Xinference's model docs give (``qwen2.5-vl-instruct``).
* Qwen3-1.7B-FP8: Qwen3-1.7B's sources above (the verbatim
  ``Qwen--Qwen3-1.7B_config.json`` of ``ai-dynamo/aiconfigurator``, torchtune's
  ``qwen3_1_7b_instruct``); the ``Qwen--Qwen3-32B-FP8`` / ``Qwen--Qwen3-30B-A3B-FP8``
  copies there, which differ from their bf16 models only by ``quantization_config``.
* Qwen3-30B-A3B-Base: ``Lightning-AI/litgpt`` ``litgpt/config.py``
  (``Qwen3-30B-A3B-Base``: the sizes of Qwen3-30B-A3B); the model card as copied in
  https://huggingface.co/unsloth/Qwen3-30B-A3B-Base-bnb-4bit (48 layers, 32/4 heads,
  128 experts with 8 active, pre-training extended to 32K tokens). litgpt gives every
  Qwen3 model, -Base included, 40960 positions; the -Base ``config.json`` files state
  32768 (torchtune's -Base builders, Qwen3-8B-Base's copy above), which the entry
  follows.
* Qwen3.5-35B-A3B: the verbatim ``config.json`` in ``ai-dynamo/aiconfigurator``
  ``aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3.5-35B-A3B_config.json``;
  ``THUDM/slime`` ``scripts/models/qwen3.5-35B-A3B.sh`` (the Megatron arguments,
  which slime checks against the model's ``config.json``); context length 262144 in
  Xinference's model docs (``qwen3.5``).
* Qwen3.6-35B-A3B: NVIDIA's NVFP4 re-release of it in ``ai-dynamo/aiconfigurator``
  (``nvidia--Qwen3.6-35B-A3B-NVFP4_config.json``, the same ``text_config`` as
  Qwen3.5-35B-A3B's); ``THUDM/slime`` ``tests/test_qwen3.6_35B_A3B_pd_mooncake.py``
  (runs Qwen/Qwen3.6-35B-A3B with the Qwen3.5-35B-A3B arguments);
  ``NVIDIA-NeMo/Megatron-Bridge`` ``docs/models/qwen/qwen35-vl.md`` (same architecture
  as Qwen3.5 MoE, 256 experts with top-8 routing, 40 layers of 3 DeltaNet + 1
  attention); the model card (hidden 2048, 248320-token vocabulary, 16/2 attention
  heads of 256, expert width 512, 262,144 tokens).
* DeepSeek-V3, DeepSeek-V3-Base, DeepSeek-R1: verbatim ``config.json`` copies in
  ``ai-dynamo/aiconfigurator`` (``deepseek-ai--DeepSeek-V3_config.json``,
  ``deepseek-ai--DeepSeek-R1_config.json``); the V3-Base ``config.json`` explained key by
  key at https://gist.github.com/vinhnx/40eaf98b4bb51f0770276020a690bad5; the model card
  (671B total parameters for V3-Base and V3 alike).
* Mixtral: verbatim ``config.json`` copies in ``ai-dynamo/aiconfigurator``
  (``mistralai--Mixtral-8x{7B,22B}-v0.1_config.json``), ``mlc-ai/mlc-llm``
  ``python/mlc_llm/model/model_preset.py`` and ``scaleapi/llm-engine``
  ``model-engine/tests/unit/domain/test_llm_use_cases.py``; the Instruct variants from
  ``Lightning-AI/litgpt`` ``litgpt/config.py`` (8x22B-Instruct has the 32768-token v3
  vocabulary) and Xinference's model docs (context lengths 32768 and 65536).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType
from typing import Final

Entry = Mapping[str, int | bool]

#: The data file, in this package.
DATA: Final = "data/known_models.toml"


#: Keys of a model's entry that are not model-section keys.
_NOT_SHAPE: Final = ("shape", "quant_method")


def _load() -> tuple[dict[str, Entry], dict[str, str]]:
    """Every model of :data:`DATA`: its network's keys with its own on top, read-only;
    and the ``quant_method`` of those whose weights are quantized."""
    data = tomllib.loads(files("areal_conf").joinpath(DATA).read_text(encoding="utf-8"))
    shapes = data["shapes"]
    models: dict[str, Entry] = {
        model_id: MappingProxyType(
            {**shapes[entry["shape"]], **{k: v for k, v in entry.items() if k not in _NOT_SHAPE}}
        )
        for model_id, entry in data["models"].items()
    }
    quantized: dict[str, str] = {
        model_id: entry["quant_method"]
        for model_id, entry in data["models"].items()
        if "quant_method" in entry
    }
    return models, quantized


#: Well-known models by exact Hugging Face id -> model-section keys (read-only entries),
#: and the ``quantization_config.quant_method`` of those whose ``config.json`` has one.
KNOWN_MODELS, _QUANT_METHODS = _load()

_BY_FOLDED_ID: Final = {model_id.casefold(): model_id for model_id in KNOWN_MODELS}


def known_model(model_id: str) -> dict[str, int | bool] | None:
    """The model-section keys of a well-known model, or None.

    ``model_id`` is a Hugging Face id such as ``Qwen/Qwen3-8B``: the exact id first, then
    the same id in any letter case (``qwen/qwen3-8b``); nothing else is guessed. The
    result is a fresh dict the caller may change.
    """
    entry = KNOWN_MODELS.get(model_id)
    if entry is None:
        exact = _BY_FOLDED_ID.get(model_id.casefold())
        if exact is None:
            return None
        entry = KNOWN_MODELS[exact]
    return dict(entry)


def known_quant_method(model_id: str) -> str | None:
    """The ``quantization_config.quant_method`` of a well-known model's ``config.json``
    (``"fp8"``; ``""`` for a model without one), None for a model areal-conf does not
    know. The id is matched as by :func:`known_model`."""
    exact = model_id if model_id in KNOWN_MODELS else _BY_FOLDED_ID.get(model_id.casefold())
    if exact is None:
        return None
    return _QUANT_METHODS.get(exact, "")


def known_model_ids() -> list[str]:
    """Every id of :data:`KNOWN_MODELS`, sorted."""
    return sorted(KNOWN_MODELS)

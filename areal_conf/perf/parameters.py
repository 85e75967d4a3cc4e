"""A model's parameters, and the share one GPU of a layout holds."""

from __future__ import annotations

from dataclasses import dataclass

from areal_conf.model.shape import ModelShape


@dataclass(frozen=True)
class ParamSplit:
    """Parameters held by one GPU of the most loaded pipeline stage, by how they split."""

    dense: float  # split by tp (attention, dense MLP, shared experts, embeddings)
    replicated: float  # norms and routers: on every tp rank
    experts: float  # routed experts: split by etp×ep

    @property
    def total(self) -> float:
        return self.dense + self.replicated + self.experts


def parameter_count(model: ModelShape) -> int:
    """All parameters of the model (SwiGLU MLPs, RMSNorm, no biases)."""
    s = _layer_params(model)
    embed = model.vocab_size * model.hidden_size
    dense_layers = model.num_layers * (s["attn"] + s["mlp"] + s["norms"])
    return int(dense_layers + embed * (1 if model.tie_word_embeddings else 2) + model.hidden_size)


def _layer_params(m: ModelShape) -> dict[str, float]:
    h = m.hidden_size
    attn = h * m.head_dim * (2 * m.num_attention_heads + 2 * m.num_kv_heads)
    if m.is_moe:
        experts = m.num_experts or 0
        shared = 3 * h * m.moe_shared_expert_ffn_hidden_size
        return {
            "attn": attn,
            "mlp": shared + 3 * h * m.moe_ffn_hidden_size * experts + h * experts,
            "dense": attn + shared,
            "routed": 3 * h * m.moe_ffn_hidden_size * experts,
            "norms": 2 * h + h * experts,  # router weights are replicated like the norms
        }
    mlp = 3 * h * m.ffn_hidden_size
    return {"attn": attn, "mlp": mlp, "dense": attn + mlp, "routed": 0, "norms": 2 * h}


def split_parameters(
    model: ModelShape,
    tp: int,
    pp: int,
    etp: int,
    ep: int,
    *,
    experts_by_tp: bool = False,
    value_head: bool = False,
) -> ParamSplit:
    """Megatron-LM's most loaded shard: the first stage, with the embedding.

    ``experts_by_tp`` splits routed experts by tp like the rest (FSDP's tensor
    parallelism, and inference engines). ``value_head``: a critic's output layer maps
    the hidden state to one value instead of the vocabulary.
    """
    s = _layer_params(model)
    h = model.hidden_size
    layers = model.num_layers / pp
    embed = model.vocab_size * h
    dense = layers * s["dense"] + embed
    if pp == 1 and value_head:
        dense += h
    elif pp == 1 and not model.tie_word_embeddings:
        dense += embed  # the output layer sits on the same (only) stage
    replicated = layers * s["norms"] + h
    experts = layers * s["routed"]
    expert_split = tp if experts_by_tp else etp * ep
    return ParamSplit(dense / tp, replicated, experts / expert_split)


def lora_adapters(
    model: ModelShape, rank: int, tp: int, pp: int, etp: int, ep: int, *, experts_by_tp: bool
) -> ParamSplit:
    """The LoRA adapters one GPU of the most loaded stage holds, rank ``rank`` on every
    linear layer (AReaL's default target, ``all-linear``: fewer target modules hold
    fewer): an adapter of a ``k×n`` weight is ``rank×(k+n)``, split as its weight is."""
    h, d = model.hidden_size, model.head_dim
    q, kv = model.num_attention_heads * d, model.num_kv_heads * d
    layers = model.num_layers / pp
    attention = (h + q + 2 * kv) + (q + h)
    if model.is_moe:
        shared = model.moe_shared_expert_ffn_hidden_size
        dense = attention + ((h + 2 * shared) + (shared + h) if shared else 0)
        routed = (model.num_experts or 0) * (
            (h + 2 * model.moe_ffn_hidden_size) + (model.moe_ffn_hidden_size + h)
        )
    else:
        f = model.ffn_hidden_size
        dense, routed = attention + (h + 2 * f) + (f + h), 0
    expert_split = tp if experts_by_tp else etp * ep
    return ParamSplit(layers * rank * dense / tp, 0.0, layers * rank * routed / expert_split)

"""The memory model: the papers' anchors, Megatron-LM's formula, KV-cache arithmetic, fixes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from areal_conf import AllocationError
from areal_conf.memory import (
    GB,
    Member,
    activation_bytes_per_layer,
    estimate,
    find_fix,
    group_need,
    kv_bytes_per_token,
    parameter_count,
)
from areal_conf.model_shape import ModelShape, model_shape, read_hf_config
from areal_conf.parser import parse_backend

HF = Path(__file__).parent / "fixtures" / "hf"


def shape(name: str) -> ModelShape:
    result = model_shape(read_hf_config(str(HF / name)))
    assert isinstance(result, ModelShape)
    return result


def close(actual: float, expected: float, rel: float = 0.01) -> bool:
    return math.isclose(actual, expected, rel_tol=rel)


# -- ZeRO (Rajbhandari et al., SC'20), Table 1: Ψ = 7.5B, K = 12, Nd = 64 ----------------

# A Llama-7B-like shape whose vocabulary is chosen so that Ψ is 7.5B.
ZERO_MODEL = ModelShape(
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=32,
    head_dim=128,
    ffn_hidden_size=11008,
    vocab_size=124968,
)


def test_zero_model_has_7_5b_parameters() -> None:
    assert close(parameter_count(ZERO_MODEL), 7.5e9, 0.001)


@pytest.mark.parametrize(
    "stage, expected_gb",
    [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.88)],
    ids=["baseline", "P_os", "P_os+g", "P_os+g+p"],
)
def test_zero_table_1(stage: int, expected_gb: float) -> None:
    # ZeRO's mixed precision: fp16 weights and gradients (2 + 2 bytes), K = 12, which is
    # how Megatron and Archon keep them (FSDP keeps one storage dtype: below).
    est = estimate(
        "archon:d64", ZERO_MODEL, zero_stage=stage, dtype="float16", grad_reduce_dtype="float16"
    )
    assert est.activations == 0  # no tokens per micro-batch and no max_seq_len: not counted
    assert est.notes
    assert close(est.weights + est.grads + est.optimizer, expected_gb * GB)
    assert est.total == est.weights + est.grads + est.optimizer


@pytest.mark.parametrize(
    ("storage", "trainable", "bytes_per_param"),
    [
        ("float32", True, 16),  # AReaL 2.0's default optimizer_dtype: 4 + 4 + 2 × 4
        ("bfloat16", True, 8),  # optimizer_dtype bfloat16 (and AReaL 1.0's dtype)
        ("float32", False, 4),  # a ref or teacher: its weights alone
    ],
)
def test_fsdp_keeps_weights_grads_and_moments_in_one_dtype(
    storage: str, trainable: bool, bytes_per_param: int
) -> None:
    est = estimate("fsdp:d8", ZERO_MODEL, fsdp_storage_dtype=storage, trainable=trainable)
    params = parameter_count(ZERO_MODEL)
    assert close(est.weights + est.grads + est.optimizer, params * bytes_per_param / 8, 0.001)


def test_archon_is_zero_3_and_megatron_distributed_optimizer_is_zero_1() -> None:
    full = estimate("archon:d64", ZERO_MODEL, grad_reduce_dtype="float16")
    assert close(full.total, 1.88 * GB)
    os_only = estimate("megatron:d64", ZERO_MODEL, grad_reduce_dtype="float16")
    assert close(os_only.total, 31.4 * GB)
    plain = estimate(
        "megatron:d64", ZERO_MODEL, grad_reduce_dtype="float16", distributed_optimizer=False
    )
    assert close(plain.total, 120 * GB)


# -- Korthikanti et al. (MLSys'23), Table 2: activation bytes per layer -------------------

S, B, H, A = 2048, 1, 12288, 96  # GPT-3 175B's sizes in the paper


@pytest.mark.parametrize("t", [1, 2, 8])
def test_table_2_no_parallelism_and_tensor_parallel(t: int) -> None:
    sbh = S * B * H
    got = activation_bytes_per_layer(S, B, H, A, tp=t)
    if t == 1:
        assert close(got, sbh * (34 + 5 * A * S / H))
    assert close(got, sbh * (10 + 24 / t + 5 * A * S / (H * t)))


@pytest.mark.parametrize("t", [1, 2, 8])
def test_table_2_tensor_and_sequence_parallel(t: int) -> None:
    sbh = S * B * H
    got = activation_bytes_per_layer(S, B, H, A, tp=t, sequence_parallel=True)
    assert close(got, sbh * (34 / t + 5 * A * S / (H * t)))


@pytest.mark.parametrize("t, sp", [(1, False), (8, False)])
def test_table_2_full_recomputation(t: int, sp: bool) -> None:
    got = activation_bytes_per_layer(S, B, H, A, tp=t, sequence_parallel=sp, recompute="full")
    assert close(got, 2 * S * B * H)


def test_flash_attention_drops_the_score_term() -> None:
    sbh = S * B * H
    got = activation_bytes_per_layer(S, B, H, A, tp=8, sequence_parallel=True, flash_attention=True)
    assert close(got, sbh * 34 / 8)


def test_megatron_activation_formula_for_other_ffn_sizes() -> None:
    # Megatron-LM: sbh(18 + 4·ffn/h) per layer, divided by t with sequence parallelism.
    got = activation_bytes_per_layer(
        S, B, H, A, tp=4, sequence_parallel=True, flash_attention=True, ffn_hidden_size=3.5 * H
    )
    assert close(got, S * B * H * (18 + 4 * 3.5) / 4)


def test_training_activations_scale_with_tokens_cp_and_recompute() -> None:
    m = shape("llama3_70b")
    base = estimate("megatron:d2p4t4", m, tokens_per_microbatch=8192)
    double = estimate("megatron:d2p4t4", m, tokens_per_microbatch=16384)
    assert close(double.activations, 2 * base.activations)
    cp = estimate("megatron:p4t4c2", m, tokens_per_microbatch=16384)
    assert close(cp.activations, base.activations)
    full = estimate("megatron:d2p4t4", m, tokens_per_microbatch=8192, recompute="full")
    assert full.activations < base.activations / 5
    # 80 layers of 2sbh/t plus one layer being recomputed (pp > 1: no logits term)
    sbh = 8192 * 8192
    one = sbh * (18 + 4 * 28672 / 8192) / 4
    assert close(full.activations, 80 * 2 * sbh / 4 + one)


# -- Megatron-LM's theoretical_memory_usage.py: weights and optimizer per GPU -------------


def megatron_reference(
    m: ModelShape, tp: int, pp: int, dp: int, ep: int = 1, etp: int = 1, dist: bool = True
) -> float:
    """compute_weight_and_optimizer_memory, transcribed for SwiGLU, RMSNorm, no MTP/MLA."""
    h = m.hidden_size
    kv_channels = m.head_dim
    query_projection_size = kv_channels * m.num_attention_heads
    ratio = query_projection_size / h
    groups = m.num_kv_heads
    gated = 3 / 2
    experts = m.num_experts or 1
    moe_layers = m.num_layers if m.num_experts else 0
    dense_layers = m.num_layers - moe_layers
    norm = 1
    attention = 2 * h * h * ((1 + groups / m.num_attention_heads) * ratio)
    embedding = h * m.vocab_size
    dense_mlp = 2 * h * m.ffn_hidden_size * gated
    routed = 2 * h * m.moe_ffn_hidden_size * experts * gated if m.num_experts else 0
    layernorm = 2 * h * norm
    router = h * experts if m.num_experts else 0
    tp_sharded = (attention + dense_mlp) * dense_layers + attention * moe_layers
    replicated = layernorm * dense_layers + (layernorm + router) * moe_layers + norm * h
    expert_sharded = routed * moe_layers
    tp_most = (tp_sharded / pp + embedding) / tp
    replicated_most = replicated / pp
    expert_most = expert_sharded / pp / (etp * ep)
    if not m.tie_word_embeddings and pp == 1:
        tp_most += embedding / tp
    world = dp * tp * pp
    edp = world // (etp * ep * pp)

    def per_param(d: int) -> float:
        return 18 if not dist else 6 + 12 / d

    return (tp_most + replicated_most) * per_param(dp) + expert_most * per_param(edp)


class MegatronSizes(NamedTuple):
    """A megatron layout of a shipped model and its group sizes, written out by hand."""

    model: str  # a config in tests/fixtures/hf
    spec: str
    tp: int
    pp: int
    dp: int
    ep: int
    etp: int


MEGATRON_SIZES: list[MegatronSizes] = [
    MegatronSizes(model="llama3_70b", spec="megatron:d4p4t4", tp=4, pp=4, dp=4, ep=1, etp=1),
    MegatronSizes(model="llama3_70b", spec="megatron:d8t8", tp=8, pp=1, dp=8, ep=1, etp=1),
    MegatronSizes(model="qwen2_5_7b", spec="megatron:d2p2t2", tp=2, pp=2, dp=2, ep=1, etp=1),
    MegatronSizes(model="mixtral_8x7b", spec="megatron:d4p2t2e4", tp=2, pp=2, dp=4, ep=4, etp=1),
    MegatronSizes(
        model="qwen3_30b_a3b",
        spec="megatron:(attn:d4p2t2|ffn:p2t2e4)",
        tp=2,
        pp=2,
        dp=4,
        ep=4,
        etp=2,
    ),
]


@pytest.mark.parametrize(MegatronSizes._fields, MEGATRON_SIZES)
@pytest.mark.parametrize("dist", [True, False])
def test_megatron_weights_and_optimizer(
    model: str, spec: str, tp: int, pp: int, dp: int, ep: int, etp: int, dist: bool
) -> None:
    m = shape(model)
    est = estimate(spec, m, distributed_optimizer=dist)
    expected = megatron_reference(m, tp, pp, dp, ep, etp, dist)
    assert close(est.weights + est.grads + est.optimizer, expected, 0.01)


# -- KV cache by hand ------------------------------------------------------------------


def test_kv_cache_dense_mha_by_hand() -> None:
    # Llama-2-7B's shape: 32 layers, 32 heads of 128, MHA (kv heads = heads).
    m = ModelShape(32, 4096, 32, 32, 128, 11008, 32000)
    assert kv_bytes_per_token(m) == 2 * 32 * 32 * 128 * 2 == 524_288
    est = estimate(
        "sglang:d1", m, mem_fraction=0.8, gpu_memory_gb=80, max_new_tokens=4096, prompt_len=0
    )
    weights = parameter_count(m) * 2
    assert close(est.weights, weights, 1e-9)
    assert est.total == 0.8 * 80e9
    left = 64e9 - weights
    assert est.kv_cache == pytest.approx(left)
    assert est.kv_cache_tokens == int(left // 524_288)
    assert est.kv_cache_sequences == est.kv_cache_tokens // 4096


def test_kv_cache_gqa_by_hand() -> None:
    m = shape("llama3_70b")  # 80 layers, 8 kv heads of 128
    # tp 8: one kv head per GPU; tp 4: two; tp 16: still one (replicated).
    assert kv_bytes_per_token(m, tp=8) == 2 * 80 * 1 * 128 * 2 == 40_960
    assert kv_bytes_per_token(m, tp=4) == 2 * 80 * 2 * 128 * 2
    assert kv_bytes_per_token(m, tp=16) == 40_960
    assert kv_bytes_per_token(m, tp=4, pp=2) == 2 * 40 * 2 * 128 * 2
    est = estimate(
        "sglang:d2t8", m, max_concurrent_rollouts=256, prompt_len=1024, max_new_tokens=7168
    )
    weights = parameter_count(m) * 2 / 8
    assert close(est.weights, weights, 0.001)
    assert est.total == pytest.approx(0.9 * 80e9)  # AReaL's default mem_fraction_static
    assert est.kv_cache_tokens == int((0.9 * 80e9 - est.weights) // 40_960)
    assert est.kv_cache_sequences == est.kv_cache_tokens // 8192
    assert est.kv_cache_tokens_needed == 128 * 8192  # 256 rollouts over 2 instances


def test_inference_that_cannot_hold_its_weights_does_not_fit() -> None:
    est = estimate("vllm:d8", shape("llama3_70b"))
    assert not est.fits
    assert est.kv_cache == 0
    assert estimate("vllm:d1t8", shape("llama3_70b")).fits


# -- colocation and fixes ----------------------------------------------------------------


def test_colocated_engines_add_up_unless_offloaded() -> None:
    m = shape("qwen2_5_7b")
    alloc = parse_backend("fsdp:d8")
    knobs: dict[str, Any] = {"tokens_per_microbatch": 8192}
    actor = Member("actor", alloc, knobs)
    ref = Member("ref", alloc, {**knobs, "trainable": False})
    both = group_need([actor, ref], m)
    assert both.total == pytest.approx(both.estimates["actor"].total + both.estimates["ref"].total)
    swapped = group_need(
        [actor, Member("ref", alloc, {**knobs, "trainable": False}, offloaded=True)], m
    )
    assert swapped.total == pytest.approx(both.total)  # the largest offloaded one still runs
    both_off = group_need(
        [
            Member("actor", alloc, knobs, offloaded=True),
            Member("ref", alloc, {**knobs, "trainable": False}, offloaded=True),
        ],
        m,
    )
    assert both_off.total == pytest.approx(both.estimates["actor"].total)


def test_fix_prefers_recomputation_then_layouts_then_more_gpus() -> None:
    m = shape("qwen2_5_7b")
    alloc = parse_backend("fsdp:d8")
    members = [Member("actor", alloc, {"tokens_per_microbatch": 32768})]
    assert not group_need(members, m).fits(80 * GB)
    fix = find_fix(members, m, budget=80 * GB, n_gpus_per_node=8)
    assert fix is not None
    assert fix.changes == (("++actor.gradient_checkpointing", "true"),)
    assert fix.need.fits(80 * GB)
    # 70B on 8 GPUs: no layout of 8 GPUs holds 18 bytes × 70.6B, so more GPUs.
    big = [Member("actor", alloc, {"tokens_per_microbatch": 8192})]
    fix = find_fix(big, shape("llama3_70b"), budget=80 * GB, n_gpus_per_node=8)
    assert fix is not None and fix.gpus > 8
    new = parse_backend(dict(fix.changes)["actor.backend"])
    assert new.world_size == fix.gpus
    assert estimate(new, shape("llama3_70b"), tokens_per_microbatch=8192, recompute="full").fits


def test_estimate_rejects_unknown_shape_and_bad_knobs() -> None:
    with pytest.raises(AllocationError, match="model shape unknown"):
        estimate("fsdp:d8", {"num_layers": 32})
    with pytest.raises(AllocationError, match="zero_stage"):
        estimate("fsdp:d8", ZERO_MODEL, zero_stage=4)
    with pytest.raises(AllocationError, match="unknown data type"):
        estimate("fsdp:d8", ZERO_MODEL, dtype="float13")
    with pytest.raises(AllocationError, match="memory fraction"):
        estimate("sglang:d1", ZERO_MODEL, mem_fraction=1.5)


def test_gb_and_breakdown() -> None:
    est = estimate("archon:d64", ZERO_MODEL, grad_reduce_dtype="float16")
    gb = est.gb()
    assert set(gb) == {"weights", "grads", "optimizer", "activations", "kv_cache", "total"}
    assert gb["total"] == pytest.approx(1.88, abs=0.01)
    assert est.breakdown().endswith("= 1.9 GB")
    assert est.biggest()[0] == "optimizer"


def test_a_critic_has_a_value_head_instead_of_the_vocabulary() -> None:
    m = shape("qwen2_5_7b")
    actor = estimate("fsdp:d8", m, tokens_per_microbatch=8192)
    critic = estimate("fsdp:d8", m, tokens_per_microbatch=8192, is_critic=True)
    h, v = m.hidden_size, m.vocab_size
    # the output layer: v·h parameters at 16 bytes (FSDP's float32 storage), sharded over
    # 8 ranks, become h
    assert actor.weights + actor.grads + actor.optimizer - (
        critic.weights + critic.grads + critic.optimizer
    ) == pytest.approx((v * h - h) * 16 / 8)
    # the fp32 logits of 8192 tokens: 4·s·V bytes become 4·s
    assert actor.activations - critic.activations == pytest.approx(4 * 8192 * (v - 1))


@pytest.mark.parametrize(
    "source",
    [
        str(HF / "qwen2_5_7b"),  # a model directory
        str(HF / "qwen2_5_7b" / "config.json"),  # its config.json
        "Qwen/Qwen2.5-7B-Instruct",  # a Hugging Face id (the table of well-known models)
    ],
    ids=["directory", "config.json", "hub id"],
)
def test_estimate_reads_hf_config_as_a_config_does(source: str) -> None:
    """``estimate(spec, {"hf_config": ...})`` takes the sources ``model.hf_config`` takes
    in a config, and gives what the model's own shape gives."""
    shape = model_shape(read_hf_config(str(HF / "qwen2_5_7b")))
    by_source = estimate("fsdp:d4", {"hf_config": source}, tokens_per_microbatch=4096)
    by_shape = estimate("fsdp:d4", shape, tokens_per_microbatch=4096)
    assert by_source.total == by_shape.total > 0
    # a key given beside hf_config wins over the file's
    fewer = estimate("fsdp:d4", {"hf_config": source, "num_layers": 4})
    assert fewer.weights < by_shape.weights

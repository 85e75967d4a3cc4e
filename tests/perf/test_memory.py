"""The memory model: the papers' anchors, Megatron-LM's formula, KV-cache arithmetic, fixes."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pytest
from _helpers import FIXTURES
from _perf_tables import QWEN3_30B_A3B

from areal_conf import AllocationError
from areal_conf.model.shape import ModelShape, model_shape, read_hf_config
from areal_conf.perf.comm_buffers import (
    NCCL_BUFFERS_PER_CHANNEL,
    NCCL_CHANNELS,
    comm_buffer_bytes,
    communicators,
)
from areal_conf.perf.memory import (
    CUDA_CONTEXT_BYTES,
    GB,
    MemoryEstimate,
    activation_bytes_per_layer,
    estimate,
    kv_bytes_per_token,
)
from areal_conf.perf.memory_fixes import Fix, Member, Verdict, find_fix, fix_candidates, group_need
from areal_conf.perf.parameters import parameter_count
from areal_conf.spec.parser import parse_backend

HF = FIXTURES / "hf"


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
    # beside the model states, the process's CUDA context and NCCL buffers (one
    # communicator: the 64 data-parallel ranks are the world)
    assert est.cuda_context == CUDA_CONTEXT_BYTES
    assert est.comm_buffers == NCCL_CHANNELS * NCCL_BUFFERS_PER_CHANNEL
    assert (
        est.total == est.weights + est.grads + est.optimizer + est.cuda_context + est.comm_buffers
    )


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


def model_states(est: MemoryEstimate) -> float:
    return est.weights + est.grads + est.optimizer


def test_archon_is_zero_3_and_megatron_distributed_optimizer_is_zero_1() -> None:
    full = estimate("archon:d64", ZERO_MODEL, grad_reduce_dtype="float16")
    assert close(model_states(full), 1.88 * GB)
    os_only = estimate("megatron:d64", ZERO_MODEL, grad_reduce_dtype="float16")
    assert close(model_states(os_only), 31.4 * GB)
    plain = estimate(
        "megatron:d64", ZERO_MODEL, grad_reduce_dtype="float16", distributed_optimizer=False
    )
    assert close(model_states(plain), 120 * GB)


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


@pytest.mark.parametrize("t, sp", [(1, False), (8, True)])
def test_op_level_checkpointing_keeps_six_tensors_a_layer(t: int, sp: bool) -> None:
    """The input, queries, values, attention output, first MLP matmul and output, in
    bf16; the values as wide as the queries (an upper bound with grouped-query attention)."""
    got = activation_bytes_per_layer(S, B, H, A, tp=t, sequence_parallel=sp, recompute="op")
    assert close(got, 2 * S * B * H * (5 + 4) / t)


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
    # SGLang reserves its fraction of what is free beside the CUDA context (one GPU: no
    # NCCL communicator)
    assert est.comm_buffers == 0
    assert est.reserved == pytest.approx(0.8 * (80e9 - CUDA_CONTEXT_BYTES))
    assert est.total == pytest.approx(est.reserved + CUDA_CONTEXT_BYTES)
    left = 0.8 * (80e9 - CUDA_CONTEXT_BYTES) - weights
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
    # AReaL's default mem_fraction_static, of what the CUDA context and the tp group's
    # NCCL buffers leave free
    comm = NCCL_CHANNELS * NCCL_BUFFERS_PER_CHANNEL
    assert est.comm_buffers == comm
    reserved = 0.9 * (80e9 - CUDA_CONTEXT_BYTES - comm)
    assert est.reserved == pytest.approx(reserved)
    assert est.kv_cache_tokens == int((reserved - est.weights) // 40_960)
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
    # the actor runs; the ref's CUDA context and NCCL buffers stay (offload moves tensors)
    ref_stays = both.estimates["ref"].cuda_context + both.estimates["ref"].comm_buffers
    assert ref_stays > 0
    assert both_off.total == pytest.approx(both.estimates["actor"].total + ref_stays)


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
    assert set(gb) == {
        "weights",
        "grads",
        "optimizer",
        "activations",
        "kv_cache",
        "cuda_context",
        "comm_buffers",
        "total",
    }
    assert gb["total"] == pytest.approx(1.88 + 0.5 + 0.15, abs=0.01)
    assert est.breakdown().endswith("+ CUDA context 0.5 + NCCL buffers 0.2 = 2.5 GB")
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


# -- what every process holds: the CUDA context and NCCL's buffers ------------------------


def test_nccl_buffers_per_channel_are_nccls_default_sizes() -> None:
    """NCCL 2.27's defaults (src/init.cc:618-631, src/include/device.h): LL is 8 lines ×
    512 threads × 8 steps of 16-byte lines, LL128 120 elements × 640 threads × 8 steps of
    8 bytes, SIMPLE NCCL_BUFFSIZE, 4 MiB."""
    assert NCCL_BUFFERS_PER_CHANNEL == 524_288 + 4_915_200 + 4_194_304 == 9_633_792
    assert NCCL_CHANNELS == 16


class Groups(NamedTuple):
    """A layout and the NCCL communicators one of its ranks belongs to."""

    spec: str
    moe: bool
    count: int
    why: str


COMMUNICATORS: list[Groups] = [
    Groups("fsdp:d1", False, 0, "one rank: no collective"),
    Groups("fsdp:d8", False, 1, "the data-parallel group is the world"),
    Groups("fsdp:d4t2", False, 3, "t, d (the gradients), the world"),
    Groups("fsdp:d2c4", False, 2, "c, d×c (the world)"),
    Groups("fsdp:c8", False, 1, "c is d×c and the world"),
    Groups("megatron:d2p2t2", False, 4, "t, p, d, the world"),
    Groups("megatron:d2p2t2c2", False, 5, "t, c, p, d×c, the world"),
    Groups("megatron:d8e4", True, 3, "the world (d), the expert all-to-all, expert d of 2"),
    Groups("megatron:d8e4", False, 1, "no experts in the model: the world"),
    Groups("megatron:d4e4", True, 2, "the world, the expert all-to-all (expert d is 1)"),
    Groups("sglang:d4", False, 0, "servers of one GPU"),
    Groups("sglang:d2t4", False, 1, "an instance's t group is its world"),
    Groups("vllm:p2t2", False, 3, "t, p, the instance's world"),
]


@pytest.mark.parametrize(
    Groups._fields, COMMUNICATORS, ids=[f"{g.spec}-{g.why}" for g in COMMUNICATORS]
)
def test_communicators_of_a_layout(spec: str, moe: bool, count: int, why: str) -> None:
    alloc = parse_backend(spec)
    assert communicators(alloc, moe) == count, why
    assert comm_buffer_bytes(alloc, moe) == count * NCCL_CHANNELS * NCCL_BUFFERS_PER_CHANNEL


def test_every_process_holds_its_cuda_context_and_nccl_buffers() -> None:
    m = shape("qwen2_5_7b")
    est = estimate("megatron:d2p2t2", m, tokens_per_microbatch=8192)
    assert est.cuda_context == CUDA_CONTEXT_BYTES == 0.5e9
    assert est.comm_buffers == 4 * NCCL_CHANNELS * NCCL_BUFFERS_PER_CHANNEL
    states = est.weights + est.grads + est.optimizer + est.activations
    assert est.total == pytest.approx(states + est.cuda_context + est.comm_buffers)
    text = est.breakdown()
    assert text.endswith(f"+ CUDA context 0.5 + NCCL buffers 0.6 = {est.total / GB:.1f} GB")
    assert est.gb()["cuda_context"] == 0.5 and est.gb()["comm_buffers"] == 0.62
    # an engine in another engine's processes (colocated, fork: false) holds neither
    shared = estimate("megatron:d2p2t2", m, tokens_per_microbatch=8192, own_process=False)
    assert shared.cuda_context == shared.comm_buffers == 0
    assert shared.total == pytest.approx(states)
    assert "CUDA context" not in shared.breakdown()


def test_sglang_takes_its_fraction_of_what_is_free_and_vllm_of_the_whole_gpu() -> None:
    """SGLang: mem_fraction_static × the memory free after the CUDA context and NCCL
    (model_runner_kv_cache_mixin.py:171); vLLM: gpu_memory_utilization × the GPU
    (v1/worker/utils.py:408)."""
    m = shape("qwen2_5_7b")
    comm = NCCL_CHANNELS * NCCL_BUFFERS_PER_CHANNEL  # one t group of 2
    sglang = estimate("sglang:d1t2", m, mem_fraction=0.8, gpu_memory_gb=80)
    assert sglang.reserved == pytest.approx(0.8 * (80e9 - CUDA_CONTEXT_BYTES - comm))
    assert sglang.total == pytest.approx(0.8 * (80e9 - CUDA_CONTEXT_BYTES - comm) + 0.5e9 + comm)
    vllm = estimate("vllm:d1t2", m, mem_fraction=0.8, gpu_memory_gb=80)
    assert vllm.reserved == pytest.approx(0.8 * 80e9)
    assert vllm.kv_cache == pytest.approx(0.8 * 80e9 - vllm.weights)
    assert vllm.total == pytest.approx(0.8 * 80e9 + CUDA_CONTEXT_BYTES + comm)
    text = vllm.breakdown()
    assert text.startswith("reserves 64.0 GB: weights 7.6 + KV cache 56.4 GB (")
    assert ", beside CUDA context 0.5 + NCCL buffers 0.2: 64.7 GB" in text


class Server(NamedTuple):
    """An inference layout with its knobs, and whether it fits a GPU."""

    spec: str
    knobs: dict[str, Any]
    fits: bool
    why: str


SERVERS: list[Server] = [
    Server("sglang:d1t8", {}, True, "70B over 8 GPUs: room for many requests"),
    Server("sglang:d1", {}, False, "141 GB of weights in a 71.6 GB reserve: no KV cache"),
    Server("sglang:d1t2", {}, False, "5,226 tokens: less than one request of 16,384"),
    Server("sglang:d1t2", {"max_new_tokens": 4096}, True, "a request of 4,096 tokens fits"),
    Server("sglang:d1t2", {"max_new_tokens": 4096, "prompt_len": 2048}, False, "6,144 do not"),
    Server("vllm:d1t2", {}, False, "8,819 tokens: less than one request"),
    Server("vllm:d1t2", {"mem_fraction": 0.92}, True, "at 0.92, 18,586 tokens"),
    Server("vllm:d1t8", {"mem_fraction": 0.995}, False, "0.995 of the GPU is not free"),
]


@pytest.mark.parametrize(Server._fields, SERVERS, ids=[f"{s.spec}-{s.why}" for s in SERVERS])
def test_a_server_fits_when_one_request_has_kv_room(
    spec: str, knobs: dict[str, Any], fits: bool, why: str
) -> None:
    est = estimate(spec, shape("llama3_70b"), gpu_memory_gb=80, **knobs)
    assert est.fits is fits, why
    assert est.request_tokens == knobs.get("prompt_len", 0) + knobs.get("max_new_tokens", 16384)


def test_fix_of_a_server_without_room_for_one_request() -> None:
    """The candidates, least disruptive first: a higher memory fraction, shorter
    responses, more GPUs (on its 2 GPUs no other layout has more room)."""
    m = shape("llama3_70b")
    members = [Member("rollout", parse_backend("sglang:d1t2"), {"max_new_tokens": 16384})]
    found = list(fix_candidates(members, m, budget=80 * GB, n_gpus_per_node=8, max_factor=2))
    assert [f.changes for f in found] == [
        (("sglang.mem_fraction_static", "0.93"),),
        (("gconfig.max_new_tokens", "4096"),),  # 5,226 tokens hold 4,096, not 8,192
        (("rollout.backend", "sglang:t4"),),  # on 4 GPUs (sglang:d2t2 has no more room)
        (("rollout.backend", "sglang:p2t2"),),
        (("rollout.backend", "sglang:p4"),),
    ]
    assert all(f.need.fits(80 * GB) for f in found)
    first = find_fix(members, m, budget=80 * GB, n_gpus_per_node=8)
    assert first is not None and first.changes == found[0].changes


def test_find_fix_takes_the_first_candidate_the_check_passes() -> None:
    """A refused candidate on more GPUs than the group has ends the candidates on that
    many GPUs; a final refusal ends the search."""
    m = shape("llama3_70b")
    members = [Member("actor", parse_backend("fsdp:d8"), {"tokens_per_microbatch": 8192})]
    every = list(fix_candidates(members, m, budget=80 * GB, n_gpus_per_node=8, max_factor=4))
    counts = sorted({f.gpus for f in every})
    assert counts[0] > 8 and len(counts) > 1
    seen: list[Fix] = []

    def refuse_the_first_count(fix: Fix) -> Verdict:
        seen.append(fix)
        return Verdict(None) if fix.gpus == counts[0] else Verdict(fix)

    found = find_fix(
        members, m, budget=80 * GB, n_gpus_per_node=8, max_factor=4, accept=refuse_the_first_count
    )
    assert found is not None and found.gpus == counts[1]
    assert [f.gpus for f in seen] == [counts[0], counts[1]]  # one try on the first count

    def final(fix: Fix) -> Verdict:
        return Verdict(None, final=True)

    assert find_fix(members, m, budget=80 * GB, n_gpus_per_node=8, accept=final) is None


def test_a_ranking_counts_the_cuda_context_and_nccl_buffers_in_what_fits() -> None:
    """The report: a layout ranked first at 79.4 of 80 GB while the CUDA context and
    NCCL buffers were left out. Ranking (``layouts --rank``, ``suggest``) reads the same
    estimate: megatron:d4t2 of Qwen2.5-7B with micro-batches of 19,968 tokens holds 79.6
    GB of model states and activations, 80.5 GB with its process's context and buffers,
    and comes after every layout that fits."""
    from areal_conf.perf.ranking import rank_layouts

    m = shape("qwen2_5_7b")
    est = estimate("megatron:d4t2", m, tokens_per_microbatch=19968, gpu_memory_gb=80)
    assert est.weights + est.grads + est.optimizer + est.activations < 80 * GB < est.total
    ranked = rank_layouts(
        "megatron",
        8,
        {"hf_config": str(HF / "qwen2_5_7b")},
        gpu="h100",
        tokens_per_step=1 << 20,
        tokens_per_microbatch=19968,
        gpu_memory_gb=80,
    )
    by_spec = {r.spec: r for r in ranked}
    assert by_spec["megatron:d4t2"].memory.total == est.total
    assert not by_spec["megatron:d4t2"].fits
    fitting = [r.spec for r in ranked if r.fits]
    assert fitting and ranked.index(by_spec["megatron:d4t2"]) >= len(fitting)


def test_lora_gives_gradients_and_adam_state_to_the_adapters_only() -> None:
    """Megatron with LoRA (AReaL's use_lora): the frozen weights stay in bf16 without
    gradients or a master copy; the adapters' gradients and optimizer state grow with
    the rank; nothing else changes."""
    shape = {**QWEN3_30B_A3B, "max_seq_len": 8192}
    whole = estimate("megatron:d8e4", shape)
    r32 = estimate("megatron:d8e4", shape, lora_rank=32)
    r64 = estimate("megatron:d8e4", shape, lora_rank=64)
    assert r32.grads < whole.grads / 20 and r32.optimizer < whole.optimizer / 20
    assert r64.grads == pytest.approx(2 * r32.grads)
    assert r64.optimizer == pytest.approx(2 * r32.optimizer)
    assert whole.weights < r32.weights < whole.weights * 1.1  # the adapters' own weights
    assert r32.activations == whole.activations
    with pytest.raises(AllocationError):
        estimate("megatron:d8e4", shape, lora_rank=-1)

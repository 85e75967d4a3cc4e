"""The prices of work on one GPU type, shared by the step-time and decode models: a
model's sizes and FLOPs, GEMMs, memory-bound kernels and collectives (the model they
serve is described in :mod:`areal_conf.perf.step_time`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from areal_conf.arguments import whole
from areal_conf.model.hardware import Hardware
from areal_conf.model.shape import ModelShape, shape_of
from areal_conf.spec.backends import MAX_SIZE

# -- kernel constants (first principles; see the module docstring) ----------------------
TILE: Final = 128  # output tile of a tensor-core GEMM kernel, each side
TILE_K_OVERHEAD: Final = 128  # a tile's prologue and epilogue, in units of K
KERNEL_LAUNCH_S: Final = 4e-6  # one CUDA kernel launched back to back
ATTENTION_EFFICIENCY: Final = 0.75  # flash attention's share of the GEMM rate
HBM_EFFICIENCY: Final = 0.85  # streaming kernels reach about this share of HBM bandwidth
LINK_EFFICIENCY: Final = 0.9  # NCCL bus bandwidth over the link's data-sheet speed
# Bytes Transformer Engine moves to quantize one value of an FP8 GEMM's input: it reads
# the bf16 value (2) and writes it in FP8 twice, row-wise and column-wise (Hopper's FP8
# GEMMs take one layout only, so the transposed copy feeds the other pass of the
# backward; MXFP8 and blockwise scale each copy along its own axis): 4. Current scaling
# ("tensorwise") first reads the tensor once more for its amax: 2 more.
FP8_QUANTIZE_BYTES: Final = 4
FP8_AMAX_BYTES: Final = 2
NVLINK_STEP_S: Final = 3e-6  # one ring step within a node
NETWORK_STEP_S: Final = 8e-6  # one ring step across nodes
NCCL_SMS: Final = 32  # NCCL's channels (one SM each) beside overlapped compute
OPTIMIZER_BYTES_PER_PARAM: Final = 34.0  # Adam: fp32 master, two moments, grad, bf16 copy
# Bytes a materialized attention score costs outside GEMMs (no flash attention): the
# fused scale-mask-softmax reads and writes it (4), dropout reads it, writes it and its
# mask (5), in bf16.
SCORE_BYTES: Final = 9
# Eager (unfused) element-wise kernels of a Hugging Face model under FSDP move this
# many times the bytes of Megatron's fused ones (RMSNorm alone is five kernels).
UNFUSED_FACTOR: Final = 2.0
# bf16 values a token and layer reads and writes outside GEMMs (forward): norms and
# residuals (10 h), rotary q and k, the gated activation (3 f).
ELEMENTWISE_PER_HIDDEN: Final = 10

# -- the shape, as the step-time model reads it -----------------------------------------


@dataclass(frozen=True)
class Sizes:
    """A model's shape in the step-time model's short names (0 for what a model has not)."""

    #: Transformer layers.
    layers: int
    #: The hidden size.
    h: int
    #: Query heads, and key/value heads (fewer with grouped-query attention).
    heads: int
    kv_heads: int
    #: The size of one head.
    head_dim: int
    #: The intermediate size of a dense layer's MLP.
    ffn: int
    #: The vocabulary (the embedding's and the output layer's rows).
    vocab: int
    #: Routed experts (0: a dense model), and the experts each token is routed to.
    experts: int
    topk: int
    #: The intermediate size of one routed expert, and of the shared experts together.
    moe_ffn: int
    shared_ffn: int


def sizes_of(model: ModelShape | Mapping[str, Any]) -> Sizes:
    return sizes(shape_of(model))


@functools.lru_cache(maxsize=256)
def sizes(shape: ModelShape) -> Sizes:
    moe = shape.is_moe
    return Sizes(
        layers=shape.num_layers,
        h=shape.hidden_size,
        heads=shape.num_attention_heads,
        kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        ffn=shape.ffn_hidden_size,
        vocab=shape.vocab_size,
        experts=(shape.num_experts or 0) if moe else 0,
        topk=shape.moe_router_topk if moe else 0,
        moe_ffn=shape.moe_ffn_hidden_size if moe else 0,
        shared_ffn=shape.moe_shared_expert_ffn_hidden_size if moe else 0,
    )


def model_flops_per_token(model: ModelShape | Mapping[str, Any], context: float) -> float:
    """Forward plus backward FLOPs of one token (6 per active weight, causal attention over
    ``context`` tokens), without recomputation: the numerator of MFU."""
    return training_flops_per_token(sizes_of(model), context)


def training_flops_per_token(s: Sizes, context: float) -> float:
    layer = layer_matmul_weights(s) * 6 + 3 * 2 * s.heads * s.head_dim * context
    return s.layers * layer + 6 * s.h * s.vocab


def layer_matmul_weights(s: Sizes) -> float:
    """Weights one token multiplies by in one layer (active experts only)."""
    attn = s.h * s.head_dim * (2 * s.heads + 2 * s.kv_heads)
    if s.experts:
        return attn + 3 * s.h * (s.topk * s.moe_ffn + s.shared_ffn) + s.h * s.experts
    return attn + 3 * s.h * s.ffn


# -- pricing ----------------------------------------------------------------------------


class Pricer:
    """Seconds of kernels and collectives on one GPU type."""

    __slots__ = ("attention_flops", "flops", "fp8_flops", "hbm", "inter", "intra", "sms")

    def __init__(self, gpu: Hardware) -> None:
        self.flops = gpu.sustained_tflops * 1e12
        self.fp8_flops = gpu.fp8_sustained_tflops * 1e12
        self.attention_flops = self.flops * ATTENTION_EFFICIENCY
        self.hbm = gpu.hbm_tb_per_s * 1e12 * HBM_EFFICIENCY
        self.sms = gpu.sm_count
        self.intra = gpu.intra_node_gb_per_s * 1e9 * LINK_EFFICIENCY
        self.inter = gpu.inter_node_gb_per_s * 1e9 * LINK_EFFICIENCY

    def gemm(self, m: float, k: float, n: float, fp8: bool = False) -> float:
        """One GEMM ``(m×k)·(k×n)`` into a bf16 output: a roofline with tile fill, plus a
        launch. Its operands are bf16, or with ``fp8`` FP8 at the FP8 rate (their
        quantization is priced by the caller)."""
        tiles = math.ceil(m / TILE) * math.ceil(n / TILE)
        waves = math.ceil(tiles / self.sms)
        fill = tiles / (waves * self.sms) * k / (k + TILE_K_OVERHEAD)
        compute = 2.0 * m * k * n / ((self.fp8_flops if fp8 else self.flops) * fill)
        memory = ((1.0 if fp8 else 2.0) * (m * k + k * n) + 2.0 * m * n) / self.hbm
        return (compute if compute > memory else memory) + KERNEL_LAUNCH_S

    def port(self, senders_per_node: int, gpus_per_node: int) -> float:
        """Network bytes per second of one GPU when ``senders_per_node`` GPUs of its node
        send across nodes at once (they share the node's ports, one a GPU)."""
        ports = max(1.0, gpus_per_node / max(1, senders_per_node))
        return min(self.intra, self.inter * ports)

    def all_reduce(self, n: int, per_node: int, nbytes: float) -> float:
        """All-reduce of ``nbytes`` over ``n`` GPUs, ``per_node`` of them a node. Across
        nodes it is hierarchical: reduce-scatter within the node over NVLink, all-reduce
        of ``1/per_node`` of the buffer over the network (so the group's members on a
        node use their ports together), all-gather within the node."""
        if n <= 1:
            return 0.0
        if n <= per_node:
            return 2 * ((n - 1) * NVLINK_STEP_S + (n - 1) / n * nbytes / self.intra)
        k = per_node
        nodes = n / k
        inside = 2 * ((k - 1) * NVLINK_STEP_S + (k - 1) / k * nbytes / self.intra)
        across = 2 * ((nodes - 1) * NETWORK_STEP_S + (nodes - 1) / nodes * nbytes / k / self.inter)
        return inside + across

    def ring(self, n: int, per_node: int, nbytes: float, busy_per_node: int, g: int) -> float:
        """All-gather (or reduce-scatter) of ``nbytes`` over a ring of ``n`` GPUs,
        ``per_node`` of them a node. Across nodes NCCL pins each ring channel to a NIC and
        forms as many rings as the node has NICs (v2.10.3 ``src/graph/search.cc``
        L463-467), so the members of a node cross the network together, each channel
        through its own member's port (shared with the other GPUs of the node that
        communicate at the same time), at most at NVLink's speed: 2 × 8 A100 with 8 HDR
        NICs reach 184 GB/s of all-reduce bus bandwidth against 231 on one node
        (Microsoft's ``mscclpp`` ``docs/performance-ndmv4.md``)."""
        if n <= 1:
            return 0.0
        if n <= per_node:
            return (n - 1) * NVLINK_STEP_S + (n - 1) / n * nbytes / self.intra
        link = min(self.intra, self.port(busy_per_node, g) * per_node)
        return (n - 1) * NETWORK_STEP_S + (n - 1) / n * nbytes / link


def gpus_per_node(value: object) -> int:
    """The ``n_gpus_per_node`` argument: a whole number of GPUs, at most the grammar's
    limit."""
    return whole("n_gpus_per_node", value, example="e.g. 8", maximum=MAX_SIZE)


def other_nodes_hit(experts: int, topk: int, nodes: int) -> float:
    """Other nodes a token's ``topk`` experts are on, expected, when ``experts`` are spread
    evenly over ``nodes`` and a token picks its experts uniformly: ``(nodes − 1)`` times
    the chance that a node holds none of them, subtracted from one."""
    if nodes <= 1:
        return 0.0
    elsewhere = experts - experts / nodes  # the experts not on one given node
    miss = 1.0
    for i in range(topk):
        miss *= max(0.0, (elsewhere - i) / (experts - i))
    return (nodes - 1) * (1 - miss)

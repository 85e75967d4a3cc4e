"""How long one training step of a layout takes: :func:`step_time` (pure; no Hydra).

The model is analytic: it counts the work of one optimizer step on the slowest GPU of a
layout and prices each piece from the GPU's data sheet (:mod:`areal_conf.model.hardware`), so
that layouts can be ranked before anything runs. Nothing in it is fitted to one
measurement table; the constants below are the hardware's, or first-principles
properties of the kernels, and ``benchmarks/steptime.py`` compares the result with
published measurements it was not tuned on row by row.

**Work.** Per token and transformer layer, the forward pass multiplies by every weight
matrix once (2 FLOPs per weight: QKV, output projection, the gated MLP or the ``topk``
routed experts plus the shared expert, the router) and runs causal attention (``2·a·d·S``
FLOPs for ``a`` heads of size ``d`` over a context ``S``: half of the ``S×S`` scores are
masked out and flash attention skips them). The backward pass costs twice the forward's
matrix FLOPs (attention 2.5×: flash attention's backward recomputes the scores); full
recomputation runs the forward again, selective recomputation the attention core again,
op-level checkpointing (Archon's default: PyTorch saves the attention and every second
matmul) half the matmuls, the grouped expert GEMMs and the memory-bound kernels again.
The output layer adds ``2·h·V`` per token on the last pipeline stage. Everything a
micro-batch does on one GPU is split as Megatron splits it: by ``tp`` (and ``cp`` for the
tokens), the experts' weights by ``ep×etp``, an expert shard running the tokens of its
whole ``etp`` group (gathered after the dispatch), so that the expert FLOPs a GPU runs do
not depend on how the experts are split.

**Matrix multiplications.** A GEMM of ``M×K`` by ``K×N`` takes the longer of its FLOPs
at ``peak × gemm_efficiency × fill`` and its bytes at the HBM bandwidth (a roofline), plus
a kernel launch. ``fill`` is how well the output tiles fill the GPU: 128×128 output
tiles run in waves of one tile per streaming multiprocessor, so a GEMM of ``T`` tiles takes
``ceil(T / SMs)`` waves and the last, partial wave leaves the other SMs idle (wave
quantization: ``T / (waves × SMs)``), times ``K / (K + 128)`` for each tile's fixed
prologue and epilogue. So small micro-batches and large ``tp`` (thin matrices, few waves)
lose efficiency, and a larger micro-batch gains it until its GEMMs run many full waves.
``gemm_efficiency`` is what cuBLAS reaches on large bf16 GEMMs (a property of the GPU,
from vendor and public GEMM benchmarks, in :mod:`areal_conf.model.hardware`).

**Memory-bound kernels.** Norms, residual additions, rotary embedding, the gated
activation and the loss read and write activations without multiplying: their bytes
(about ``10h + 2(a+kv)d + 3f`` values a token and layer forward, plus ``4·topk·h`` for
an MoE layer's token permutation, twice that backward, more with fp32 logits) at 85% of
the HBM bandwidth. Without sequence parallelism the ``10h`` part is repeated on every
tensor-parallel rank, which is why Megatron splits it. FSDP runs Hugging Face models
eagerly, whose unfused kernels move about twice the bytes of Megatron's fused ones.
Without flash attention (``flash_attention=False``) the scores are materialised: two
batched GEMMs over the whole square and about 9 bytes a score for scale, mask, softmax
and dropout.

**Collectives.** A ring all-gather or reduce-scatter of ``n`` GPUs moves ``(n−1)/n`` of
the buffer per GPU at the bandwidth of its slowest link, plus ``n−1`` steps of latency
(NCCL's rings; 3 µs a step over NVLink, 8 µs over the network). Within one node the link
is NVLink. Across nodes each GPU has one network port of ``inter_node_gb_per_s``, and
NCCL pins each ring channel to a NIC and forms as many rings as the group's GPUs on a
node have NICs, so a group with ``k`` members on each node crosses the network through
``k`` ports at once (at most NVLink's speed); when every GPU of a node takes part in such
collectives at once (data-, tensor-, context- and expert-parallel groups all run theirs
together) the node's ports are shared one a GPU, so a group with one member a node (the
data-parallel group of a tensor-parallel group that fills its node) crosses at one
port's speed. An all-reduce across nodes (Megatron's
gradients without the distributed optimizer) is hierarchical: reduce-scatter within the
node over NVLink, all-reduce of ``1/k`` of the buffer over the network (``k`` the
group's members on a node, whose ports work together), all-gather within the node.
Pipeline sends come from the GPUs of one stage only, each tensor-parallel rank sending
its ``1/tp`` of the activation (Megatron's scatter-gather), so a stage smaller than a
node shares the node's idle ports; the slowest hop paces every slot. Expert all-to-alls
send the part of a GPU's tokens bound for other nodes through its port and the rest over
NVLink, one copy for each of a token's experts; with ``dedup_dispatch`` (Megatron's flex
dispatcher, DeepEP) a token crosses once to each other node that holds any of its
experts (for uniform routing, ``(n−1)(1 − C(E − E/n, k)/C(E, k))`` of ``n`` nodes),
which forwards it over NVLink; with ``etp > 1`` the tokens of an expert shard are
all-gathered over its etp group and the results reduce-scattered. Large messages reach
90% of a link's speed (NCCL's bus bandwidth on NVLink and InfiniBand).

**FP8** (``fp8``, AReaL's ``megatron.fp8_config``): Transformer Engine runs the linear
layers' GEMMs (QKV, projection, MLP, experts) on FP8 operands at the GPU's FP8 rate,
twice its bf16 one; attention, the router and the output layer stay bf16. Each GEMM's
input (forward) and each output's gradient (backward, shared by the data- and
weight-gradient GEMMs) is quantized first: read in bf16, written in FP8 row-wise and
column-wise, 4 bytes a value at the HBM bandwidth, 6 with current scaling
(``tensorwise``), which reads the tensor once more for its amax. The weights are
quantized on a step's first micro-batch and kept for the others. With
``fp8_param_gather`` the distributed optimizer all-gathers the linear layers' weights in
FP8 (one byte each); the other collectives stay bf16.

**Overlap.** Communication running beside computation hides behind it, but NCCL's
kernels then hold ``NCCL_SMS`` streaming multiprocessors, so the computation beside it
runs slower by that share. What is hidden and what is exposed:

- tensor parallel (Megatron and FSDP's DTensor): exposed, on the critical path of each
  layer; with ``tp_comm_overlap`` (Transformer Engine's user buffers) it overlaps with the
  GEMMs it feeds, in chunks;
- context parallel (ring attention): the K/V exchange overlaps with the attention of the
  previous chunk; the excess is exposed;
- expert parallel: the token all-to-alls (dispatch and combine, forward and backward)
  are exposed;
- pipeline: 1F1B with ``m`` micro-batches and ``p`` stages runs ``m + p − 1`` slots of the
  slowest stage, so the bubble is ``(p−1)/(m+p−1)`` of the pipelined time (divided by the
  virtual stages of an interleaved schedule); each slot's activation send is exposed;
- data parallel, Megatron: the gradient reduce-scatter (all-reduce without the
  distributed optimizer) after the last micro-batch's backward, overlapped with that
  backward when ``overlap_grad_reduce``, and the parameter all-gather after the optimizer
  step (overlapped with the next forward when ``overlap_param_gather``; AReaL leaves both
  off unless ``megatron.ddp`` turns them on: areal/api/cli_args.py:787-788);
- data parallel, FSDP (ZeRO-3): every micro-batch gathers the weights for the forward and
  again for the backward (recomputation runs inside the backward's gather) and
  reduce-scatters the gradients; FSDP prefetches the next layer's weights, so each phase
  (forward, backward) takes the longer of its compute and its traffic, plus the first
  layer's gather. ``zero3="deepspeed-0.3"`` prices DeepSpeed's first ZeRO-3 instead (the
  one Narayanan et al. 2021 measured): one all-gather a parameter tensor after a
  device-wide synchronise, so nothing overlaps and each gather pays its ring's latency;
  the weights gathered again for a recomputed forward; each micro-batch's gradients
  all-reduced in buckets of 5·10⁸ elements.

Megatron adds each micro-batch's weight gradients into its gradient buffer (in
``grad_reduce_dtype``). With ``gradient_accumulation_fusion`` (Megatron-LM's training
script and megatron-bridge turn it on) the weight-gradient GEMM accumulates straight into
the buffer. Without it (Megatron-Core's default, so AReaL's through mbridge, and 2021
Megatron) a separate kernel reads the new gradient and reads and writes the buffer,
``2 + 2 × grad bytes`` a parameter each micro-batch at the HBM bandwidth: a cost that a
larger micro-batch pays less often.

The optimizer step (Adam on the local shard) reads and writes about 34 bytes a parameter
at the HBM bandwidth.

**Forward only** (``forward_only``: a values or log-probability pass, such as the PPO
critic's ``compute_values`` or a ref's ``compute_logp``): the same micro-batches run the
forward kernels only, each collective once (tensor, context and expert parallelism
forward, FSDP's weight gathers for the forward, pipeline sends of activations), the
output layer once; no backward, recomputation, gradient traffic, gradient accumulation or
optimizer step.

**Not modelled**: load imbalance between experts or between packed sequences, stragglers
and network congestion from other jobs, CPU overheads (data loading, Python), kernel
fusion beyond the above, FP8 tensor-parallel collectives, LoRA (priced as training every
weight), the rollout engine's weight updates, and Archon beyond treating it as
Megatron-like (its tensor and pipeline parallelism as Megatron's, its data parallelism as
FSDP's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

from areal_conf.arguments import choice, flag, optional_flag, optional_whole, whole
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.model.hardware import FP8_RECIPES, Hardware, fp8_gpus, fp8_refused, hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.memory import dtype_bytes
from areal_conf.perf.pricing import (
    ELEMENTWISE_PER_HIDDEN,
    FP8_AMAX_BYTES,
    FP8_QUANTIZE_BYTES,
    KERNEL_LAUNCH_S,
    NCCL_SMS,
    NETWORK_STEP_S,
    NVLINK_STEP_S,
    OPTIMIZER_BYTES_PER_PARAM,
    SCORE_BYTES,
    UNFUSED_FACTOR,
    Pricer,
    Sizes,
    gpus_per_node,
    other_nodes_hit,
    sizes_of,
    training_flops_per_token,
)
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import MAX_SIZE
from areal_conf.spec.parser import as_allocation

Recompute = Literal["none", "selective", "op", "full"]
RECOMPUTE: Final = ("none", "selective", "op", "full")
RECOMPUTE_HINT: Final = (
    '"none", "selective" (the attention core), "op" (op-level) or "full" (whole layers)'
)
#: The forward passes' tensor-parallel collectives a recomputation runs again.
RECOMPUTED_COLLECTIVES: Final = {"none": 0.0, "selective": 0.0, "op": 0.5, "full": 1.0}
Fp8 = Literal["delayed", "tensorwise", "blockwise", "mxfp8"]  # FP8_RECIPES
FP8_HINT: Final = (
    '"delayed", "tensorwise" (current scaling), "blockwise" or "mxfp8" (the recipes '
    "Megatron's Transformer Engine runs), or None for bf16"
)
Zero3 = Literal["fsdp", "deepspeed-0.3"]
ZERO3: Final = ("fsdp", "deepspeed-0.3")
ZERO3_HINT: Final = (
    "\"fsdp\" (PyTorch's FSDP: a layer's weights gathered together, prefetched) or "
    '"deepspeed-0.3" (DeepSpeed\'s first ZeRO-3: each weight gathered alone)'
)
#: All-gathers of one layer's weights under DeepSpeed's first ZeRO-3, one a parameter
#: tensor (``partition_parameters.py`` v0.3.13 L473-493, L596-629): a GPT layer of the
#: runs it trained has twelve, the weight and the bias of its two LayerNorms, QKV, the
#: attention's projection and the MLP's two matrices.
DEEPSPEED_GATHERS_PER_LAYER: Final = 12
#: Gradient elements DeepSpeed's ZeRO-3 all-reduces at once (``reduce_bucket_size``,
#: ``stage3.py`` v0.3.13 L563).
DEEPSPEED_REDUCE_BUCKET: Final = 500_000_000


@dataclass(frozen=True)
class StepTime:
    """Predicted seconds of one optimizer step on the slowest GPU, term by term.

    ``total`` is the sum of the terms. ``compute`` is the matrix, attention and
    memory-bound work of the micro-batches; ``tp_comm``, ``cp_comm``, ``ep_comm`` and
    ``pp_comm`` the exposed communication of tensor, context and expert parallelism and
    of pipeline sends; ``pp_bubble`` the pipeline's idle slots; ``dp_comm`` the exposed
    part of the data-parallel gradient and weight traffic; ``optimizer`` the Adam update.
    ``mfu`` is the model FLOPs of the step (no recomputation counted) over the step time
    and the bf16 peak of every GPU (so FP8 training can exceed the bf16 rate);
    ``microbatches`` is ``m`` per data-parallel rank.
    """

    total: float
    compute: float
    tp_comm: float
    cp_comm: float
    ep_comm: float
    pp_comm: float
    pp_bubble: float
    dp_comm: float
    optimizer: float
    mfu: float
    microbatches: int
    model_flops: float
    #: The optimizer steps of the batch, each priced as this one (1 for a forward pass
    #: over the whole batch).
    optimizer_steps: int = 1

    TERMS: ClassVar[tuple[str, ...]] = (
        "compute",
        "tp_comm",
        "cp_comm",
        "ep_comm",
        "pp_comm",
        "pp_bubble",
        "dp_comm",
        "optimizer",
    )

    def terms(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.TERMS}

    def tokens_per_second(self, tokens_per_step: int) -> float:
        return tokens_per_step / self.total

    @property
    def batch_seconds(self) -> float:
        """Seconds of the whole batch: every optimizer step of it."""
        return self.optimizer_steps * self.total

    def breakdown(self) -> str:
        """``compute 1.20 + tp_comm 0.10 + ... = 1.45 s (MFU 41%)``, the non-zero terms."""
        parts = [f"{name} {value:.3g}" for name, value in self.terms().items() if value > 0]
        return " + ".join(parts) + f" = {self.total:.3g} s (MFU {self.mfu:.0%})"


# -- the step ---------------------------------------------------------------------------


def step_time(
    allocation_or_spec: ModelAllocation | str,
    model: ModelShape | Mapping[str, Any],
    *,
    gpu: str | Hardware,
    n_gpus_per_node: int = 8,
    tokens_per_step: int,
    tokens_per_microbatch: int,
    recompute: Recompute = "none",
    seq_len: int | None = None,
    sequence_parallel: bool | None = None,
    virtual_stages: int = 1,
    overlap_grad_reduce: bool = False,
    tp_comm_overlap: bool = False,
    grad_reduce_dtype: str = "float32",
    flash_attention: bool = True,
    overlap_param_gather: bool = False,
    zero3: Zero3 = "fsdp",
    distributed_optimizer: bool = True,
    gradient_accumulation_fusion: bool = False,
    dedup_dispatch: bool = False,
    forward_only: bool = False,
    fp8: Fp8 | None = None,
    fp8_param_gather: bool = False,
) -> StepTime:
    """Predicted time of one training step of a layout (see the module docstring).

    ``model`` is the mapping or :class:`ModelShape` :func:`areal_conf.perf.memory.estimate`
    takes (dense or MoE; ``hf_config`` fills the sizes it does not give). ``gpu`` is a
    name of ``areal_conf.HARDWARE`` or a :class:`Hardware`. ``tokens_per_step`` is the
    tokens of one optimizer step over all data-parallel ranks (AReaL: the batch's
    sequences × their mean length); ``tokens_per_microbatch`` the tokens of one
    micro-batch of one data-parallel rank (AReaL's ``mb_spec.max_tokens_per_mb``).
    ``recompute``: ``"none"``, ``"selective"`` (the attention core, Megatron's
    ``recompute_granularity: selective``), ``"op"`` (op-level checkpointing, Archon's
    default ``ac_mode: selective``: the attention and every second matmul saved) or
    ``"full"`` (whole layers, AReaL's ``gradient_checkpointing``).

    Knobs with Megatron's meaning: ``seq_len`` the length of one packed sequence
    (default: a micro-batch is one sequence), ``sequence_parallel`` (default ``tp > 1``
    for Megatron and Archon), ``virtual_stages`` (interleaved 1F1B),
    ``overlap_grad_reduce`` and ``overlap_param_gather`` (off, as AReaL's
    ``megatron.ddp`` leaves them), ``tp_comm_overlap`` (off),
    ``grad_reduce_dtype`` (AReaL's float32), ``gradient_accumulation_fusion`` (off, as
    AReaL's default mbridge leaves it; on with ``megatron.bridge_type=megatron-bridge``)
    and ``dedup_dispatch`` (off: ``megatron.moe_token_dispatcher_type`` alltoall).
    ``zero3``: how ``fsdp`` and ``archon`` shard (``"fsdp"``, PyTorch's FSDP, as AReaL
    runs; ``"deepspeed-0.3"``, DeepSpeed's first ZeRO-3, for older published runs).
    ``forward_only``: the time of a forward pass over the same tokens instead (no
    backward, no optimizer step; ``recompute`` does not apply). ``fp8``: the
    linear layers' GEMMs in FP8 with that scaling recipe (AReaL's
    ``megatron.fp8_config.recipe``), None for bf16; ``fp8_param_gather``: those layers'
    weights kept in FP8 and all-gathered in FP8 by the distributed optimizer (AReaL's
    ``fp8_config.param`` with ``megatron.ddp.fp8_param_gather``).

    Raises AllocationError for an inference backend, an unknown GPU, tokens that are
    not positive integers, a ``tokens_per_step`` smaller than one micro-batch for
    every data-parallel rank, an ``fp8`` recipe the GPU does not run (Transformer
    Engine's rule: :func:`areal_conf.model.hardware.fp8_refused`), or
    ``fp8_param_gather`` without ``fp8``.
    """
    alloc = as_allocation(allocation_or_spec)
    gpu_ = hardware(gpu)
    if alloc.is_inference:
        raise AllocationError(
            f"step_time models a training engine; {alloc.backend} serves inference",
            str(alloc),
            hint="use decode_throughput(...) for sglang and vllm, or give a training "
            "backend (fsdp, megatron, archon)",
        )
    whole("tokens_per_step", tokens_per_step, example="e.g. tokens_per_step=1_048_576")
    whole("tokens_per_microbatch", tokens_per_microbatch, example="e.g. 16384")
    gpus_per_node(n_gpus_per_node)
    whole("virtual_stages", virtual_stages, example="1 for plain 1F1B", maximum=MAX_SIZE)
    optional_whole("seq_len", seq_len, example="e.g. 4096")
    choice("recompute", recompute, RECOMPUTE, hint=RECOMPUTE_HINT)
    choice("zero3", zero3, ZERO3, hint=ZERO3_HINT)
    if fp8 is not None:
        choice("fp8", fp8, FP8_RECIPES, hint=FP8_HINT)
        refused = fp8_refused(gpu_, fp8)
        if refused:
            raise ConfigError(
                f"fp8={fp8!r}: {refused}",
                hint=f"train in bf16 (fp8=None), another recipe, or a GPU that runs {fp8} "
                f"({fp8_gpus(fp8)})",
            )
    for name, value in (
        ("overlap_grad_reduce", overlap_grad_reduce),
        ("tp_comm_overlap", tp_comm_overlap),
        ("flash_attention", flash_attention),
        ("overlap_param_gather", overlap_param_gather),
        ("distributed_optimizer", distributed_optimizer),
        ("gradient_accumulation_fusion", gradient_accumulation_fusion),
        ("dedup_dispatch", dedup_dispatch),
        ("forward_only", forward_only),
        ("fp8_param_gather", fp8_param_gather),
    ):
        flag(name, value)
    if fp8_param_gather and fp8 is None:
        raise ConfigError(
            "fp8_param_gather: weights are gathered in FP8 only when they are FP8 (fp8=None)",
            hint='give fp8 a recipe (e.g. fp8="blockwise"), or fp8_param_gather=False',
        )
    optional_flag("sequence_parallel", sequence_parallel)
    p = alloc.parallel
    dp = p.dp_size
    if tokens_per_step < dp * tokens_per_microbatch:
        raise ConfigError(
            f"tokens_per_step {tokens_per_step:,} is less than one micro-batch of "
            f"{tokens_per_microbatch:,} tokens for each of the {dp} data-parallel ranks",
            hint=f"give tokens_per_step ≥ {dp * tokens_per_microbatch:,}, or "
            f"tokens_per_microbatch ≤ {max(1, tokens_per_step // dp):,}, or fewer "
            "data-parallel ranks",
        )
    shape = sizes_of(model)
    return _step(
        alloc,
        shape,
        gpu_,
        n_gpus_per_node,
        tokens_per_step,
        tokens_per_microbatch,
        recompute,
        seq_len or tokens_per_microbatch,
        sequence_parallel,
        virtual_stages,
        overlap_grad_reduce,
        tp_comm_overlap,
        dtype_bytes(grad_reduce_dtype),
        flash_attention,
        overlap_param_gather,
        zero3 == "deepspeed-0.3",
        distributed_optimizer,
        gradient_accumulation_fusion,
        dedup_dispatch,
        forward_only,
        fp8,
        fp8_param_gather,
    )


def _step(
    alloc: ModelAllocation,
    s: Sizes,
    gpu: Hardware,
    g: int,
    tokens_per_step: int,
    mb_tokens: int,
    recompute: str,
    seq: int,
    sequence_parallel: bool | None,
    virtual: int,
    overlap_grad_reduce: bool,
    tp_overlap: bool,
    grad_bytes: int,
    flash: bool,
    overlap_param_gather: bool,
    gather_each_weight: bool,
    distributed_optimizer: bool,
    grad_accumulation_fusion: bool,
    dedup_dispatch: bool,
    forward_only: bool = False,
    fp8: str | None = None,
    fp8_params: bool = False,
) -> StepTime:
    price = Pricer(gpu)
    if forward_only:
        recompute = "none"  # nothing to recompute without a backward
    par = alloc.parallel
    dp, tp, pp, cp = par.dp_size, par.tp_size, par.pp_size, par.cp_size
    ep, etp = par.ep_size, par.etp_size
    fsdp = alloc.backend == "fsdp"
    zero3 = alloc.backend in ("fsdp", "archon")
    sp = (tp > 1 and not fsdp) if sequence_parallel is None else sequence_parallel
    m = math.ceil(tokens_per_step / (dp * mb_tokens))
    tokens = mb_tokens / cp  # tokens of one micro-batch on one GPU
    h, hd = s.h, s.head_dim
    # Megatron places GPUs tp fastest, then cp, dp, pp: a group's members per node.
    tp_per_node = min(tp, g)
    cp_per_node = max(1, min(cp, g // tp_per_node))
    world = par.world_size
    busy_per_node = min(g, world)  # GPUs of a node running the same collectives at once

    # -- one layer, one micro-batch, one GPU: forward kernels ---------------------------
    q_out = s.heads * hd
    kv_out = s.kv_heads * hd
    gemm = price.gemm
    low = fp8 is not None  # the linear layers' GEMMs in FP8 (router and output: bf16)
    per_value = FP8_QUANTIZE_BYTES + (FP8_AMAX_BYTES if fp8 == "tensorwise" else 0)
    attn_proj = gemm(tokens, h, (q_out + 2 * kv_out) / tp, low) + gemm(tokens, q_out / tp, h, low)
    # Values a GPU quantizes to FP8 for its linear layers, one layer and micro-batch:
    # each GEMM's input in the forward and its output's gradient in the backward
    # (shared by the data- and weight-gradient GEMMs).
    quantized_in = tokens * (h + q_out / tp)
    quantized_grad = tokens * ((q_out + 2 * kv_out) / tp + h)
    if s.experts:
        # Tokens reaching one expert: the distinct tokens of the ep group's GPUs (a
        # tensor-parallel rank's 1/tp of the micro-batch) times topk, over the experts;
        # with etp > 1 an expert shard runs the tokens of its whole etp group, gathered
        # after the dispatch (Megatron-Core's token dispatchers), on 1/etp of the weights.
        routed = tokens / tp * s.topk * ep / s.experts * etp
        experts_here = s.experts / ep
        mlp = experts_here * (
            gemm(routed, h, 2 * s.moe_ffn / etp, low) + gemm(routed, s.moe_ffn / etp, h, low)
        )
        quantized_in += routed * experts_here * (h + s.moe_ffn / etp)
        quantized_grad += routed * experts_here * (2 * s.moe_ffn / etp + h)
        if s.shared_ffn:
            mlp += gemm(tokens, h, 2 * s.shared_ffn / tp, low) + gemm(
                tokens, s.shared_ffn / tp, h, low
            )
            quantized_in += tokens * (h + s.shared_ffn / tp)
            quantized_grad += tokens * (2 * s.shared_ffn / tp + h)
        mlp += gemm(tokens, h, s.experts)  # router
        # the routed activations of those tokens: topk × moe_ffn values a token of the
        # GPU's 1/tp share, whatever etp splits
        ffn_values = s.topk * s.moe_ffn / tp + s.shared_ffn / tp
    else:
        mlp = gemm(tokens, h, 2 * s.ffn / tp, low) + gemm(tokens, s.ffn / tp, h, low)
        quantized_in += tokens * (h + s.ffn / tp)
        quantized_grad += tokens * (2 * s.ffn / tp + h)
        ffn_values = s.ffn / tp
    # Flash attention: causal, so half the scores of the sequence a token belongs to; a
    # cp rank holds 1/cp of each sequence's queries against all of its keys.
    context = min(seq, mb_tokens)
    heads_here = s.heads / tp
    if flash:
        attn_flops = 2.0 * heads_here * hd * context * tokens
        attention = attn_flops / price.attention_flops + 2 * KERNEL_LAUNCH_S
    else:
        # Scores materialized: two batched GEMMs over the whole square (masked half
        # included), and scale, mask, softmax and dropout reading and writing the scores.
        sequences = max(1.0, tokens / context)
        per_head = 2 * gemm(context, hd, context)
        scores = sequences * heads_here * context * context * SCORE_BYTES / price.hbm
        attention = sequences * heads_here * (per_head - 2 * KERNEL_LAUNCH_S) + scores
        attention += 6 * KERNEL_LAUNCH_S
    replicated = ELEMENTWISE_PER_HIDDEN * h / (tp if sp else 1)
    # MoE: each token's copies are permuted to their experts and back (read and write).
    permuted = 4 * s.topk * h / tp if s.experts else 0.0
    elementwise = (
        2.0 * tokens * (replicated + 2 * (q_out + kv_out) / tp + 3 * ffn_values + permuted)
    )
    kernels = 8
    if fsdp:
        elementwise *= UNFUSED_FACTOR
        kernels = 20
    elementwise_s = elementwise / price.hbm + kernels * KERNEL_LAUNCH_S
    forward = attn_proj + mlp + attention + elementwise_s
    backward = 0.0 if forward_only else 2 * (attn_proj + mlp) + 2.5 * attention + 2 * elementwise_s
    if low:  # one quantize kernel a GEMM input, and a gradient
        forward += quantized_in * per_value / price.hbm + 4 * KERNEL_LAUNCH_S
        if not forward_only:
            backward += quantized_grad * per_value / price.hbm + 4 * KERNEL_LAUNCH_S
    if recompute == "full":
        backward += forward
    elif recompute == "selective":
        backward += attention
    elif recompute == "op":
        # Op-level checkpointing saves the attention and every second matmul's output
        # (grouped expert GEMMs are not among the ops it saves) and recomputes the rest.
        backward += 0.5 * attn_proj + (mlp if s.experts else 0.5 * mlp) + elementwise_s
    layer_compute = forward + backward

    # -- tensor parallel: an all-reduce after attention and after the MLP, each pass
    # (with sequence parallelism an all-gather before and a reduce-scatter after) ------
    tp_layer = 0.0
    if tp > 1:
        block = 2 * price.ring(tp, tp_per_node, tokens * h * 2, busy_per_node, g)
        # forward, backward, recomputed forward (op-level checkpointing saves the
        # reduce-scatters and recomputes the all-gathers: half of it)
        passes = 1 if forward_only else 2 + RECOMPUTED_COLLECTIVES[recompute]
        tp_layer = 2 * passes * block
        if tp_overlap:  # chunked against the GEMMs it feeds; the first chunk is exposed
            tp_layer = max(0.0, tp_layer - (attn_proj + mlp) * passes) + tp_layer / 4
    # -- context parallel: each rank's K and V go round the ring, forward and backward,
    # beside the attention of the chunk at hand ------------------------------------------
    cp_layer = 0.0
    if cp > 1:
        kv_bytes = 2 * tokens * kv_out / tp * 2
        exchange = price.ring(cp, cp_per_node, kv_bytes * cp, busy_per_node, g)
        # K/V forward and backward, dK/dV; beside the attention (forward 1, backward 2.5)
        passes = 1 if forward_only else 3 + (1 if recompute == "full" else 0)
        beside = attention if forward_only else 3.5 * attention
        cp_layer = max(0.0, passes * exchange - beside)
    # -- expert parallel: dispatch and combine all-to-alls over ep, forward and backward;
    # with etp > 1 the tokens an expert shard gets are all-gathered over its etp group
    # (and the results reduce-scattered) -----------------------------------------------
    ep_layer = 0.0
    if s.experts and (ep > 1 or etp > 1):
        passes = 1 if forward_only else 2 + (1 if recompute == "full" else 0)
        # Megatron's expert grid puts etp fastest, then ep.
        etp_per_node = min(etp, g)
        ep_per_node = min(ep, max(1, g // etp_per_node))
        payload = tokens / tp * s.topk * h * 2  # bytes this GPU's tokens send to experts
        if ep > 1:
            on_node = (ep_per_node - 1) / ep * payload / price.intra
            copies_off_node = (ep - ep_per_node) / ep * s.topk
            if dedup_dispatch:  # once to each other node holding one of its experts
                copies_off_node = min(
                    copies_off_node, other_nodes_hit(s.experts, s.topk, ep // ep_per_node)
                )
            off_node = tokens / tp * h * 2 * copies_off_node / price.port(busy_per_node, g)
            step = NETWORK_STEP_S if ep > ep_per_node else NVLINK_STEP_S
            ep_layer += 2 * passes * (on_node + off_node + step)
        if etp > 1:
            gathered = price.ring(etp, etp_per_node, payload * etp, busy_per_node, g)
            ep_layer += 2 * passes * gathered

    layers_per_stage = s.layers / pp
    # The last stage also runs the output layer and the loss (the slowest stage).
    # (forward once, backward twice)
    logit_passes = 1 if forward_only else 3
    logits = (
        logit_passes * gemm(tokens, h, s.vocab / tp)
        + logit_passes * (tokens * s.vocab / tp * 4 * 3) / price.hbm
    )
    stage_compute = layers_per_stage * layer_compute + logits
    stage_tp = layers_per_stage * tp_layer
    stage_cp = layers_per_stage * cp_layer
    stage_ep = layers_per_stage * ep_layer
    # -- pipeline: each slot sends a micro-batch's activation on and its gradient back;
    # each tensor-parallel rank sends its 1/tp (Megatron's scatter-gather). Only the GPUs
    # of one stage send across a node boundary, so a stage smaller than a node shares
    # the node's ports; the slowest hop paces every slot. ----------------------------------
    pp_slot = 0.0
    if pp > 1:
        stage_gpus = tp * cp * dp
        chunk = tokens * h * 2 / tp / virtual
        if stage_gpus * pp <= g:  # the whole pipeline within one node
            hop = chunk / price.intra + NVLINK_STEP_S
        else:
            hop = chunk / price.port(min(g, stage_gpus), g) + NETWORK_STEP_S
        pp_slot = virtual * (1 if forward_only else 2) * hop  # activation on, gradient back

    # -- data parallel --------------------------------------------------------------------
    dense_params = (
        s.layers * (s.h * hd * (2 * s.heads + 2 * s.kv_heads) + 3 * s.h * s.shared_ffn)
        + (0 if s.experts else s.layers * 3 * s.h * s.ffn)
        + 2 * s.vocab * s.h
    ) / (tp * pp)
    expert_params = s.layers * 3 * s.h * s.moe_ffn * s.experts / (etp * ep * pp) if s.experts else 0
    # the linear layers' dense weights (FP8 with fp8): all but the embedding and output layer
    linear_dense = dense_params - 2 * s.vocab * s.h / (tp * pp)
    dp_group = dp * cp
    dp_per_node = max(1, min(dp_group, g // tp_per_node))
    edp = par.edp_size
    edp_per_node = max(1, min(edp, g // (etp * ep))) if etp * ep <= g else 1
    dp_comm = 0.0
    comm_slowdown = NCCL_SMS / price.sms
    if zero3 and dp_group > 1 and gather_each_weight:
        # DeepSpeed's first ZeRO-3 gathers each parameter tensor alone, after a
        # device-wide synchronise (``partition_parameters.py`` v0.3.13 L611), so nothing
        # overlaps: for the forward, again for the recomputed forward (plain forward
        # hooks) and for the backward (a weight reused within ``stage3_max_reuse_distance``,
        # 10⁹ elements, is kept: in a 175B GPT layer only the MLP's last matrix, left
        # out here). Each micro-batch's gradients are all-reduced a bucket at a time
        # (``stage3.py`` L1794-1863, ``contiguous_gradients`` off by default).
        layer_params = (dense_params + expert_params) / layers_per_stage
        passes = 1 if forward_only else 2 + (recompute == "full")
        tensor_bytes = layer_params * 2 / DEEPSPEED_GATHERS_PER_LAYER
        one_gather = price.ring(dp_group, dp_per_node, tensor_bytes, busy_per_node, g)
        gathers = layers_per_stage * passes * DEEPSPEED_GATHERS_PER_LAYER * one_gather
        stage_params = dense_params + expert_params
        buckets = 0 if forward_only else math.ceil(stage_params / DEEPSPEED_REDUCE_BUCKET)
        bucket_bytes = stage_params * grad_bytes / max(1, buckets)
        grads = buckets * price.all_reduce(dp_group, dp_per_node, bucket_bytes)
        dp_comm = m * (gathers + grads)
    elif zero3 and dp_group > 1:
        # Per micro-batch and layer: gather the weights for the forward, gather them for
        # the backward (a recomputed forward runs inside it) and reduce-scatter the
        # gradients. FSDP prefetches the next layer, so each phase takes the longer of
        # its compute and its traffic.
        layer_params = (dense_params + expert_params) / layers_per_stage
        gather = price.ring(dp_group, dp_per_node, layer_params * 2, busy_per_node, g)
        scatter = price.ring(dp_group, dp_per_node, layer_params * grad_bytes, busy_per_node, g)
        fwd = forward + tp_layer / 3
        bwd = layer_compute - forward + tp_layer * 2 / 3
        if forward_only:
            phases = [(forward + tp_layer, gather)]
        else:
            phases = [(fwd, gather), (bwd, gather + scatter)]
        exposed = sum(max(0.0, comm - busy) for busy, comm in phases)
        hidden = sum(min(comm, busy) for busy, comm in phases)
        dp_comm = m * (layers_per_stage * (exposed + hidden * comm_slowdown) + gather)
    elif (dp_group > 1 or edp > 1) and not forward_only:  # no gradients to reduce
        if distributed_optimizer:  # reduce-scatter gradients, all-gather new weights
            grads = price.ring(dp_group, dp_per_node, dense_params * grad_bytes, busy_per_node, g)
            grads += price.ring(edp, edp_per_node, expert_params * grad_bytes, busy_per_node, g)
            # FP8 weights (the linear layers') are gathered in one byte each
            weight_bytes = 1 if fp8_params else 2
            dense_bytes = (dense_params - linear_dense) * 2 + linear_dense * weight_bytes
            params = price.ring(dp_group, dp_per_node, dense_bytes, busy_per_node, g)
            params += price.ring(edp, edp_per_node, expert_params * weight_bytes, busy_per_node, g)
        else:
            grads = price.all_reduce(dp_group, dp_per_node, dense_params * grad_bytes)
            grads += price.all_reduce(edp, edp_per_node, expert_params * grad_bytes)
            params = 0.0
        # The gradient reduction overlaps the last micro-batch's backward, the
        # parameter all-gather the first micro-batch's forward.
        dp_comm = grads + params
        if overlap_grad_reduce:
            hidden = min(grads, layers_per_stage * (backward + tp_layer / 2))
            dp_comm -= hidden * (1 - comm_slowdown)
        if overlap_param_gather:
            hidden = min(params, layers_per_stage * (forward + tp_layer / 3))
            dp_comm -= hidden * (1 - comm_slowdown)

    # Without fusion, a separate add each micro-batch (no gradients: no add).
    if not zero3 and not grad_accumulation_fusion and not forward_only:
        stage_compute += (dense_params + expert_params) * (2 + 2 * grad_bytes) / price.hbm
    # -- the step -------------------------------------------------------------------------
    slot = stage_compute + stage_tp + stage_cp + stage_ep + pp_slot
    bubble = (pp - 1) / virtual * slot
    sharded = zero3 or distributed_optimizer
    shard = dense_params / (dp_group if sharded else 1) + expert_params / (edp if sharded else 1)
    optimizer = (
        0.0
        if forward_only
        else shard * OPTIMIZER_BYTES_PER_PARAM / price.hbm + 50 * KERNEL_LAUNCH_S
    )
    compute = m * stage_compute
    if low:  # the weights quantized on a step's first micro-batch, kept for the others
        compute += (linear_dense + expert_params) * per_value / price.hbm
    total = compute + m * (stage_tp + stage_cp + stage_ep + pp_slot) + bubble + dp_comm + optimizer
    # A forward pass is a third of the 6 FLOPs a weight of forward plus backward.
    model_flops = (
        tokens_per_step * training_flops_per_token(s, context) / (3 if forward_only else 1)
    )
    mfu = model_flops / (total * world * gpu.peak_tflops * 1e12)
    return StepTime(
        total=total,
        compute=compute,
        tp_comm=m * stage_tp,
        cp_comm=m * stage_cp,
        ep_comm=m * stage_ep,
        pp_comm=m * pp_slot,
        pp_bubble=bubble,
        dp_comm=dp_comm,
        optimizer=optimizer,
        mfu=mfu,
        microbatches=m,
        model_flops=model_flops,
    )

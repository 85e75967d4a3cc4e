"""Per-GPU memory of one engine: :func:`estimate` (pure; no Hydra, no config reading).

Bytes on the most loaded GPU of an engine, term by term (:class:`MemoryEstimate`).

Training (Adam). Megatron and Archon (bf16 mixed precision): per parameter the bf16
weight (2 bytes), its gradient (``grad_reduce_dtype``: 4 bytes in float32, AReaL's
default) and the optimizer state, K = 12 bytes (fp32 master weight and two fp32 moments;
8 when the weights are fp32 already). FSDP keeps weights, gradients and both Adam moments
in one storage dtype and casts to ``dtype`` for compute, so a parameter takes 4 × its
bytes: AReaL 2.0 stores in ``optimizer_dtype`` (float32 by default: 16 bytes; bfloat16:
8), AReaL 1.0 in ``dtype`` (bfloat16: 8), engines without an optimizer the weight alone.
How each term is split over the GPUs follows the backend:

- fsdp: full shard (ZeRO stage 3) over the ``dp×cp`` ranks, after tensor parallelism;
- megatron: dense parts split by ``tp×pp``, routed experts by ``etp×ep×pp``; the
  distributed optimizer (AReaL's default) shards the optimizer state over ``dp×cp``
  (experts: over ``edp``), ZeRO stage 1, as in Megatron-LM's
  ``theoretical_memory_usage.py`` (6 + 12/dp bytes per parameter);
- archon: Megatron's split, then full shard over ``dp×cp`` (experts: ``edp``).

The most loaded rank is the first pipeline stage: ``num_layers/pp`` layers plus the
input embedding (and the output layer when ``pp == 1`` and it is not tied).

Activations per micro-batch follow Korthikanti et al. (2022), Table 2, per layer, with
``s`` the tokens of a micro-batch on one GPU (``tokens_per_microbatch / cp``, sequences
packed, ``b = 1``), ``h`` the hidden size, ``a`` the heads, ``t`` the tensor parallel
size and ``f`` the FFN size over ``h`` (4 in the paper, which gives its 34):

- no parallelism: ``sbh(18 + 4f + 5as/h)``;
- tensor parallel: ``sbh(10 + (8 + 4f)/t + 5as/(ht))``;
- tensor and sequence parallel: ``sbh((18 + 4f)/t + 5as/(ht))``;
- full recomputation: ``2sbh`` per layer (``/t`` with sequence parallelism), plus one
  layer's activations while it is recomputed;
- op-level checkpointing (Archon's default): the saved input, queries, values (as wide
  as the queries: an upper bound), attention output, first MLP matmul and output,
  ``2sbh(5 + f)``, ``/t`` with sequence parallelism, plus one layer being recomputed.

With flash attention (the default) the ``5as/h`` attention scores are not stored. The
first pipeline stage holds ``pp`` micro-batches of ``num_layers/pp`` layers, i.e. all
layers' worth. With ``pp == 1`` the output layer's fp32 logits (``4·s·V/t``) are added,
as Megatron-LM does. MoE layers use ``f = (topk × moe_ffn + shared_ffn) / h``.

Inference (sglang, vllm): weights split by ``tp×pp``. Each server reserves a fraction of
a GPU (``sglang.mem_fraction_static``, ``vllm.gpu_memory_utilization``) for its weights
and KV cache, and the KV cache is what the weights leave of it:
``2 (K and V) × num_layers/pp × ceil(kv_heads/tp) × head_dim × 2 bytes`` per token on each
GPU of an instance. The two servers take their fraction of different things:

- SGLang (0.5.10, AReaL's pin): of the memory free once the CUDA context and NCCL are up,
  ``mem_fraction_static × (gpu_memory − cuda_context − comm_buffers)``
  (``model_runner_kv_cache_mixin.py:171``: ``post_model_load_memory −
  pre_model_load_memory × (1 − mem_fraction_static)``, the latter measured after
  ``init_torch_distributed``, ``model_runner.py:999``);
- vLLM (0.19.1): of the whole GPU, ``gpu_memory_utilization × gpu_memory``
  (``v1/worker/utils.py:408``), free once the CUDA context and NCCL are up (``:412``).

A server whose KV cache cannot hold one request (the prompt, ``train_dataset.max_length``,
plus ``gconfig.max_new_tokens``) does not fit: with no token of room SGLang refuses to
start ("Not enough memory. Please try to increase --mem-fraction-static",
``model_runner_kv_cache_mixin.py:56``) and vLLM too ("No available memory for the cache
blocks", ``v1/core/kv_cache_utils.py:627``; a KV cache smaller than ``max_model_len``,
``kv_cache_utils.py:645``); with less room than one request, SGLang caps every request at
what the pool holds (``max_req_len``, ``managers/tp_worker.py:301``) and cuts its
``max_new_tokens`` to it (``managers/scheduler.py:1612``).

Every process on a GPU (every engine's, except a colocated one that shares its target's
processes, ``fork: false``) also holds:

- its CUDA context, :data:`CUDA_CONTEXT_BYTES` (0.5 GB). PyTorch measured 287 MB for the
  context of ``torch.cuda.init()`` with lazy module loading (its default since 1.13) and
  667 MB without (pytorch/pytorch#86509); the kernels a job loads on first use (cuBLAS,
  NCCL, attention) come on top of the lazy figure;
- the buffers of its NCCL communicators,
  :func:`areal_conf.perf.comm_buffers.comm_buffer_bytes`.

Not modelled: allocator fragmentation, FSDP's transient all-gather buffers, activations
and CUDA graphs of inference servers (the part of the GPU their fraction leaves),
multi-latent attention (DeepSeek's MLA is counted as plain attention).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from areal_conf.arguments import choice, flag, fraction, optional_flag, optional_whole, positive
from areal_conf.arguments import whole as whole_number
from areal_conf.errors import AllocationError
from areal_conf.model.shape import ModelShape, shape_of
from areal_conf.perf.comm_buffers import comm_buffer_bytes
from areal_conf.perf.parameters import lora_adapters, split_parameters
from areal_conf.settings import DEFAULT_GPU_MEMORY_GB
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.parser import as_allocation

GB: Final = 1e9  # the papers' unit, and cluster.gpu_memory_gb's

TERMS: Final = (
    *("weights", "grads", "optimizer", "activations"),
    *("kv_cache", "cuda_context", "comm_buffers"),
)
#: The terms every process holds, whatever its engine does.
PROCESS_TERMS: Final = ("cuda_context", "comm_buffers")
#: How a term is named in text (the others by their name, ``_`` as a blank).
LABELS: Final = {
    "kv_cache": "KV cache",
    "cuda_context": "CUDA context",
    "comm_buffers": "NCCL buffers",
}

#: One process's CUDA context (see the module's docstring for the measurements).
CUDA_CONTEXT_BYTES: Final = 0.5 * 1e9
#: The highest memory fraction a fix proposes for an inference server: it leaves 5% of
#: the GPU for the server's activations and CUDA graphs.
MAX_MEM_FRACTION: Final = 0.95
#: Halving tokens (a micro-batch, a response) in a fix stops at this many.
MIN_FIX_TOKENS: Final = 1024

# AReaL's defaults (areal/api/cli_args.py): SGLangConfig.mem_fraction_static and
# vLLMConfig.gpu_memory_utilization are both 0.9.
DEFAULT_MEM_FRACTION: Final = {"sglang": 0.9, "vllm": 0.9}

_DTYPE_BYTES: Final = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float8": 1,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

Recompute = Literal["none", "op", "full"]
RECOMPUTE: Final = ("none", "op", "full")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes on an engine's most loaded GPU; ``total`` is what the engine takes there.

    Every engine's process holds ``cuda_context`` and ``comm_buffers`` (NCCL). For
    inference, ``total`` is those plus the memory the server reserves (``reserved``), and
    ``kv_cache`` is what its weights leave of the reserve; ``kv_cache_tokens`` tokens fit
    (``kv_cache_sequences`` full-length sequences) against ``kv_cache_tokens_needed`` that
    the config asks for, and one request needs ``request_tokens``.
    """

    weights: float
    grads: float
    optimizer: float
    activations: float
    kv_cache: float
    total: float
    capacity: float
    kind: Literal["training", "forward", "inference"]
    kv_cache_tokens: int | None = None
    kv_cache_sequences: int | None = None
    kv_cache_tokens_needed: int | None = None
    notes: tuple[str, ...] = field(default=())
    cuda_context: float = 0.0
    comm_buffers: float = 0.0
    request_tokens: int | None = None

    @property
    def reserved(self) -> float:
        """What an inference server reserves for its weights and KV cache."""
        return self.total - self.cuda_context - self.comm_buffers

    @property
    def fits(self) -> bool:
        """It fits the GPU; an inference server also has room for one request's KV cache
        (at least one token)."""
        if self.total > self.capacity:
            return False
        if self.kind == "inference":
            return (self.kv_cache_tokens or 0) >= max(1, self.request_tokens or 0)
        return True

    def biggest(self) -> tuple[str, float]:
        """The largest term that uses memory (the KV cache of inference is what is left)."""
        terms = {t: getattr(self, t) for t in TERMS if t != "kv_cache" or self.kind != "inference"}
        name = max(terms, key=lambda t: terms[t])
        return name, terms[name]

    def gb(self) -> dict[str, float]:
        """The terms and the total in GB (10^9 bytes), rounded to 0.01."""
        return {t: round(getattr(self, t) / GB, 2) for t in (*TERMS, "total")}

    def breakdown(self) -> str:
        """``weights 17.6 + grads 35.3 + ... + CUDA context 0.5 + NCCL buffers 0.2 = 123.4
        GB``, the terms that are not zero; for inference, the reserve and what is
        beside it."""
        parts = [
            f"{term_label(name)} {getattr(self, name) / GB:.1f}"
            for name in TERMS
            if getattr(self, name) and (self.kind != "inference" or name in PROCESS_TERMS)
        ]
        if self.kind != "inference":
            return " + ".join(parts) + f" = {self.total / GB:.1f} GB"
        text = (
            f"reserves {self.reserved / GB:.1f} GB: weights {self.weights / GB:.1f} + "
            f"KV cache {self.kv_cache / GB:.1f} GB"
        )
        if self.kv_cache_tokens is not None:
            text += f" ({self.kv_cache_tokens:,} tokens"
            if self.kv_cache_sequences is not None:
                text += f", {self.kv_cache_sequences:,} full-length sequences"
            text += ")"
        if parts:
            text += f", beside {' + '.join(parts)}: {self.total / GB:.1f} GB"
        if self.kv_cache_tokens_needed is not None:
            text += f"; the config asks for {self.kv_cache_tokens_needed:,} tokens"
        return text


def term_label(name: str) -> str:
    """A term of :class:`MemoryEstimate` as text: ``CUDA context``, ``grads``."""
    return LABELS.get(name, name.replace("_", " "))


def dtype_bytes(name: str) -> int:
    try:
        return _DTYPE_BYTES[str(name).lower().removeprefix("torch.")]
    except KeyError:
        raise AllocationError(
            f"unknown data type {name!r}",
            name,
            hint="use one of " + ", ".join(sorted(_DTYPE_BYTES)),
        ) from None


# -- activations -----------------------------------------------------------------------


def activation_bytes_per_layer(
    s: float,
    b: float,
    h: int,
    a: int,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: Recompute = "none",
    flash_attention: bool = False,
    ffn_hidden_size: float | None = None,
    attention_seq_len: float | None = None,
) -> float:
    """Korthikanti et al., Table 2: activation bytes of one transformer layer.

    ``s`` tokens per sequence (or packed micro-batch), ``b`` sequences, ``h`` hidden size,
    ``a`` heads; ``ffn_hidden_size`` defaults to ``4h`` (the paper's 34 = 18 + 4·4);
    ``attention_seq_len`` is the ``s`` of the ``5as/h`` score term (the sequence length
    when sequences are packed). With ``flash_attention`` the scores are not stored.
    """
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (tp if sequence_parallel else 1)
    f = 4.0 if ffn_hidden_size is None else ffn_hidden_size / h
    if recompute == "op":
        return 2 * sbh * (5 + f) / (tp if sequence_parallel else 1)
    s_attn = s if attention_seq_len is None else attention_seq_len
    scores = 0.0 if flash_attention else sbh * 5 * a * s_attn / (h * tp)
    if sequence_parallel or tp == 1:
        return sbh * (18 + 4 * f) / tp + scores
    return sbh * (10 + (8 + 4 * f) / tp) + scores


# -- what every process holds --------------------------------------------------------


# -- the estimate ----------------------------------------------------------------------


def estimate(
    allocation_or_spec: ModelAllocation | str,
    model: ModelShape | Mapping[str, Any],
    *,
    trainable: bool = True,
    is_critic: bool = False,
    tokens_per_microbatch: int | None = None,
    recompute: Recompute = "none",
    sequence_parallel: bool | None = None,
    flash_attention: bool = True,
    distributed_optimizer: bool = True,
    zero_stage: int | None = None,
    dtype: str = "bfloat16",
    grad_reduce_dtype: str = "float32",
    fsdp_storage_dtype: str = "float32",
    mem_fraction: float | None = None,
    gpu_memory_gb: float = DEFAULT_GPU_MEMORY_GB,
    max_concurrent_rollouts: int | None = None,
    prompt_len: int = 0,
    max_new_tokens: int = 16384,
    own_process: bool = True,
    lora_rank: int | None = None,
) -> MemoryEstimate:
    """Bytes per GPU of one engine on its most loaded GPU.

    ``model`` is a :class:`ModelShape` or a mapping of the ``model`` section's keys, whose
    ``hf_config`` (a ``config.json``, a model directory or a Hugging Face id) fills the
    sizes it does not give.

    Knobs (AReaL's name and default where AReaL has one):

    - ``trainable``: False for engines without an optimizer (ref, teacher: weights and
      a forward pass only);
    - ``is_critic``: a value head (one output) instead of the vocabulary (AReaL's key);
    - ``tokens_per_microbatch``: ``mb_spec.max_tokens_per_mb`` (default None: one
      sequence of ``max_seq_len``; unknown too: activations are not counted, a note says so);
    - ``recompute``: ``"full"`` when ``gradient_checkpointing`` is on (default off),
      ``"op"`` for Archon's op-level checkpointing;
    - ``sequence_parallel``: default ``tp > 1``, as AReaL's Megatron engine sets it;
    - ``flash_attention``: ``attn_impl`` is ``flash_attention_2`` (AReaL's default);
    - ``distributed_optimizer``: ``megatron.ddp.use_distributed_optimizer`` (default on);
    - ``zero_stage``: 0-3 to override the backend's own sharding (fsdp 3, archon 3,
      megatron 1 with the distributed optimizer, else 0);
    - ``dtype``, ``grad_reduce_dtype``: AReaL's keys (bfloat16, float32);
    - ``fsdp_storage_dtype``: the dtype FSDP keeps weights, gradients and Adam moments in
      (AReaL 2.0's ``optimizer_dtype``, float32 by default; AReaL 1.0 used ``dtype``);
    - ``mem_fraction``: ``sglang.mem_fraction_static`` / ``vllm.gpu_memory_utilization``
      (default 0.9);
    - ``gpu_memory_gb``: ``cluster.gpu_memory_gb`` (80);
    - ``max_concurrent_rollouts``, ``prompt_len`` (``train_dataset.max_length``),
      ``max_new_tokens`` (``gconfig.max_new_tokens``, default 16384): the KV cache the
      config asks for, and one request's (``prompt_len + max_new_tokens``);
    - ``own_process``: False for an engine that runs in another engine's processes (a
      colocated engine with ``fork: false``): no CUDA context or NCCL buffers of its own;
    - ``lora_rank``: ``lora_rank`` when ``use_lora`` is on (None: off): only LoRA adapters
      of that rank on every linear layer have gradients and optimizer state.
    """
    alloc = as_allocation(allocation_or_spec)
    shape = shape_of(model)  # hf_config: a file, directory or model id
    trainable = flag("trainable", trainable)
    is_critic = flag("is_critic", is_critic)
    tokens_per_microbatch = optional_whole(
        "tokens_per_microbatch", tokens_per_microbatch, example="e.g. 16384, or None"
    )
    recompute = choice(  # type: ignore[assignment]
        "recompute", recompute, RECOMPUTE, hint='"full" (gradient_checkpointing), "op" or "none"'
    )
    sequence_parallel = optional_flag("sequence_parallel", sequence_parallel)
    flash_attention = flag("flash_attention", flash_attention)
    distributed_optimizer = flag("distributed_optimizer", distributed_optimizer)
    zero_stage = optional_whole(
        "zero_stage",
        zero_stage,
        example="0: no sharding; 1: optimizer state; 2: and gradients; 3: and weights",
        minimum=0,
        maximum=3,
    )
    if mem_fraction is not None:
        mem_fraction = fraction(
            "mem_fraction",
            mem_fraction,
            example="the server's memory fraction (sglang.mem_fraction_static, "
            "vllm.gpu_memory_utilization), e.g. 0.8",
        )
    gpu_memory_gb = positive("gpu_memory_gb", gpu_memory_gb, example="e.g. 80 (H100), 141 (H200)")
    max_concurrent_rollouts = optional_whole(
        "max_concurrent_rollouts", max_concurrent_rollouts, example="e.g. 256, or None"
    )
    prompt_len = whole_number("prompt_len", prompt_len, example="e.g. 1024", minimum=0)
    max_new_tokens = whole_number("max_new_tokens", max_new_tokens, example="e.g. 8192", minimum=0)
    own_process = flag("own_process", own_process)
    lora_rank = optional_whole("lora_rank", lora_rank, example="e.g. 32 (AReaL's), or None")
    capacity = gpu_memory_gb * GB
    context = CUDA_CONTEXT_BYTES if own_process else 0.0
    comm = comm_buffer_bytes(alloc, shape.is_moe) if own_process else 0.0
    if alloc.is_inference:
        return _inference(
            alloc,
            shape,
            capacity,
            mem_fraction,
            max_concurrent_rollouts,
            prompt_len,
            max_new_tokens,
            dtype,
            context,
            comm,
        )
    p = alloc.parallel
    tp, pp, cp = p.tp_size, p.pp_size, p.cp_size
    backend = alloc.backend
    if backend == "fsdp":
        split = split_parameters(shape, tp, 1, tp, 1, experts_by_tp=True, value_head=is_critic)
    else:
        split = split_parameters(shape, tp, pp, p.etp_size, p.ep_size, value_head=is_critic)
    stage = zero_stage
    if stage is None:
        stage = 1 if backend == "megatron" and distributed_optimizer else 3
        if backend == "megatron" and not distributed_optimizer:
            stage = 0
    dense_group = p.dp_size * cp
    expert_group = dense_group if backend == "fsdp" else p.edp_size
    compute_bytes = dtype_bytes(dtype)
    if backend == "fsdp":
        # One storage dtype for weights, gradients and both moments; no master copy.
        param_bytes = grad_bytes = dtype_bytes(fsdp_storage_dtype)
        k = 2 * param_bytes
    else:
        param_bytes = compute_bytes
        grad_bytes = dtype_bytes(grad_reduce_dtype)
        k = 12 if param_bytes < 4 else 8

    def sharded(count_dense: float, count_experts: float, per_param: float, on: bool) -> float:
        if not on:
            return (count_dense + count_experts) * per_param
        return count_dense * per_param / dense_group + count_experts * per_param / expert_group

    dense_params = split.dense + split.replicated
    weights = sharded(dense_params, split.experts, param_bytes, stage >= 3)
    notes: list[str] = []
    trained = (dense_params, split.experts)
    if lora_rank is not None and trainable:  # only the adapters train; the weights stay
        fsdp = backend == "fsdp"
        adapters = lora_adapters(
            shape, lora_rank, tp, 1 if fsdp else pp, p.etp_size, p.ep_size, experts_by_tp=fsdp
        )
        trained = (adapters.dense, adapters.experts)
        weights += sharded(*trained, param_bytes, stage >= 3)
    grads = sharded(*trained, grad_bytes, stage >= 2) if trainable else 0.0
    optimizer = sharded(*trained, k, stage >= 1) if trainable else 0.0
    tokens = tokens_per_microbatch
    if tokens is None:
        tokens = shape.max_seq_len
    if tokens is None:
        activations = 0.0
        notes.append(
            "activations not counted: set mb_spec.max_tokens_per_mb (or model.max_seq_len)"
        )
    else:
        sp = (tp > 1) if sequence_parallel is None else sequence_parallel
        activations = _activations(
            shape,
            tokens / cp,
            tp,
            pp,
            sp,
            recompute if trainable else "none",
            flash_attention,
            trainable,
            1 if is_critic else shape.vocab_size,
        )
    total = weights + grads + optimizer + activations + context + comm
    return MemoryEstimate(
        weights,
        grads,
        optimizer,
        activations,
        0.0,
        total,
        capacity,
        "training" if trainable else "forward",
        notes=tuple(notes),
        cuda_context=context,
        comm_buffers=comm,
    )


def _activations(
    m: ModelShape,
    s: float,
    tp: int,
    pp: int,
    sp: bool,
    recompute: Recompute,
    flash: bool,
    backward: bool,
    outputs: int,
) -> float:
    h, a = m.hidden_size, m.num_attention_heads
    if m.is_moe:
        ffn = m.moe_router_topk * m.moe_ffn_hidden_size + m.moe_shared_expert_ffn_hidden_size
    else:
        ffn = m.ffn_hidden_size
    s_attn = m.max_seq_len or s

    def layer(mode: Recompute) -> float:
        return activation_bytes_per_layer(
            s,
            1,
            h,
            a,
            tp=tp,
            sequence_parallel=sp,
            recompute=mode,
            flash_attention=flash,
            ffn_hidden_size=ffn,
            attention_seq_len=s_attn,
        )

    logits = 4 * s * outputs / tp if pp == 1 else 0.0
    if not backward:
        return layer("none") + logits  # a forward pass keeps one layer at a time
    # The first stage holds pp micro-batches of num_layers/pp layers: num_layers in all.
    if recompute != "none":
        return m.num_layers * layer(recompute) + layer("none") + logits
    return m.num_layers * layer("none") + logits


def _inference(
    alloc: ModelAllocation,
    m: ModelShape,
    capacity: float,
    mem_fraction: float | None,
    concurrent: int | None,
    prompt_len: int,
    max_new_tokens: int,
    dtype: str,
    context: float,
    comm: float,
) -> MemoryEstimate:
    p = alloc.parallel
    tp, pp = p.tp_size, p.pp_size
    fraction = mem_fraction
    if fraction is None:  # estimate() checked a given one
        fraction = DEFAULT_MEM_FRACTION.get(alloc.backend, 0.9)
    weight_bytes = dtype_bytes(dtype)
    weights = split_parameters(m, tp, pp, tp, 1, experts_by_tp=True).total * weight_bytes
    if alloc.backend == "sglang":  # a fraction of what is free once context and NCCL are up
        reserved = fraction * max(0.0, capacity - context - comm)
    else:  # vLLM: a fraction of the whole GPU
        reserved = fraction * capacity
    kv = max(0.0, reserved - weights)
    per_token = kv_bytes_per_token(m, tp, pp, dtype)
    tokens = int(kv // per_token)
    seq = prompt_len + max_new_tokens
    sequences = tokens // seq if seq > 0 else None
    needed = None
    if concurrent is not None and seq > 0:
        needed = math.ceil(concurrent / alloc.num_instances) * seq
    return MemoryEstimate(
        weights,
        0.0,
        0.0,
        0.0,
        kv,
        context + comm + reserved,
        capacity,
        "inference",
        kv_cache_tokens=tokens,
        kv_cache_sequences=sequences,
        kv_cache_tokens_needed=needed,
        cuda_context=context,
        comm_buffers=comm,
        request_tokens=seq,
    )


def kv_bytes_per_token(m: ModelShape, tp: int = 1, pp: int = 1, dtype: str = "bfloat16") -> float:
    """KV-cache bytes per token on one GPU: K and V of its layers and its kv heads.

    With more tp ranks than kv heads each rank keeps a copy of one head.
    """
    layers = math.ceil(m.num_layers / pp)
    heads = math.ceil(m.num_kv_heads / tp)
    return 2 * layers * heads * m.head_dim * dtype_bytes(dtype)

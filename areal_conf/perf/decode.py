"""Tokens per second an inference engine generates: :func:`decode_throughput`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Required, TypedDict

from areal_conf.arguments import whole
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.model.hardware import Hardware, hardware
from areal_conf.model.shape import ModelShape, shape_of
from areal_conf.perf.memory import estimate, kv_bytes_per_token
from areal_conf.perf.parameters import split_parameters
from areal_conf.perf.pricing import (
    KERNEL_LAUNCH_S,
    Pricer,
    Sizes,
    gpus_per_node,
    layer_matmul_weights,
    sizes,
)
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.parser import as_allocation


@dataclass(frozen=True)
class DecodeThroughput:
    """Tokens per second an inference engine generates (all its instances together).

    ``batch`` is the sequences one instance decodes at once: the concurrent requests it
    gets, or what its KV cache holds (``kv_limited``). ``bound`` says which limit sets the
    pace of a decode step: ``"memory"`` (reading the weights and the KV cache from HBM)
    or ``"compute"`` (the FLOPs). ``step_s`` is one decode step of an instance and
    ``kv_capacity_tokens`` the tokens its KV cache holds.
    """

    tokens_per_s: float
    per_instance: float
    batch: int
    bound: Literal["memory", "compute"]
    step_s: float
    kv_capacity_tokens: int
    kv_limited: bool
    #: Seconds a step spends prefilling the prompts of the requests that replace those
    #: finished (0: prefill not counted); within ``step_s``.
    prefill_s: float = 0.0


@dataclass(frozen=True)
class RequestLengths:
    """What one request of a continuous batch prefills (``prompt``, its tokens) and
    generates (``response``, the mean tokens), for :func:`decode_throughput` to count the
    prefill of the requests that replace the finished ones."""

    prompt: int
    response: int

    def __post_init__(self) -> None:
        whole("RequestLengths.prompt", self.prompt, example="e.g. 1024", minimum=0)
        whole("RequestLengths.response", self.response, example="e.g. 2048")


class DecodeLoad(TypedDict, total=False):
    """:func:`decode_throughput`'s keyword arguments: the GPU, the load and the node, as
    a ranking of layouts passes them on."""

    gpu: Required[str | Hardware]
    concurrent: Required[int]
    context_tokens: Required[int]
    n_gpus_per_node: int
    mem_fraction: float | None
    requests: RequestLengths | None


def decode_throughput(
    spec: ModelAllocation | str,
    model: ModelShape | Mapping[str, Any],
    *,
    gpu: str | Hardware,
    concurrent: int,
    context_tokens: int,
    n_gpus_per_node: int = 8,
    mem_fraction: float | None = None,
    requests: RequestLengths | None = None,
) -> DecodeThroughput:
    """Decode tokens per second of an sglang or vllm engine (see the module docstring).

    ``concurrent``: the sequences being generated at once over all instances (AReaL's
    ``rollout.max_concurrent_rollouts``); ``context_tokens``: the mean context a decode
    step attends to (prompt plus half the response, for responses generated from
    scratch). Each step of an instance reads every weight of its GPUs once (for MoE, the
    experts the batch's tokens reach) and the KV cache of its batch, and does the batch's
    FLOPs; the slower of the two, plus the tensor-parallel all-reduces of a layer, is the
    step. Pipeline stages decode ``pp`` micro-batches at once. The KV capacity is the
    memory estimate's (``mem_fraction`` as ``sglang.mem_fraction_static``).

    With ``requests``, a continuous batch also prefills the prompts of the requests
    that replace the finished ones: ``batch / response`` requests a step, each prefilling
    ``prompt`` tokens (AReaL disables the radix cache, so the samples of one prompt each
    prefill it: ``sglang.disable_radix_cache``, ``vllm.no_enable_prefix_caching``).
    Prefill is compute: every weight's 2 FLOPs a token and causal attention over the
    prompt. vLLM mixes the prefill chunks into the decode step (its V1 scheduler), where
    they run beside the step's weight reads; SGLang runs them as batches of their own
    between decode steps (``sglang.enable_mixed_chunk`` is off in AReaL's config), which
    add to the step. Without ``requests`` prefill is not counted. Speculative decoding,
    the scheduler's CPU time and preemption are not modelled.
    """
    alloc = _server(spec, "decode_throughput", "step_time(...)")
    gpu_ = hardware(gpu)
    whole("concurrent", concurrent, example="e.g. the rollout's max_concurrent_rollouts, 256")
    whole("context_tokens", context_tokens, example="e.g. prompt + half the response, 4096")
    if requests is not None and not isinstance(requests, RequestLengths):
        raise ConfigError(
            f"requests must be RequestLengths or None, got {type(requests).__name__}",
            hint="e.g. requests=RequestLengths(prompt=1024, response=2048)",
        )
    gpus_per_node(n_gpus_per_node)
    shape = shape_of(model)
    s = sizes(shape)
    memory = estimate(alloc, shape, gpu_memory_gb=gpu_.hbm_gb, mem_fraction=mem_fraction)
    capacity = memory.kv_cache_tokens or 0
    if capacity < context_tokens:
        raise AllocationError(
            f"{alloc} on {gpu_.name} keeps {capacity:,} tokens of KV cache per instance, "
            f"less than one sequence of {context_tokens:,} tokens",
            str(alloc),
            hint="give each instance more GPUs (tp), a GPU with more memory, or a larger "
            "memory fraction (sglang.mem_fraction_static)",
        )
    par = alloc.parallel
    tp, pp, instances = par.tp_size, par.pp_size, par.dp_size
    wanted = math.ceil(concurrent / instances)
    batch = min(wanted, capacity // context_tokens)
    price = Pricer(gpu_)
    split = split_parameters(shape, tp, pp, tp, 1, experts_by_tp=True)
    weights = split.total * 2
    if s.experts:  # only the experts some token of the micro-batch is routed to
        tokens = max(1.0, batch / pp)
        reached = 1 - (1 - s.topk / s.experts) ** tokens
        weights -= split.experts * 2 * (1 - reached)
    micro = batch / pp  # sequences of one micro-batch of a stage
    kv = micro * context_tokens * kv_bytes_per_token(shape, tp, pp)
    memory_s = (weights + kv) / price.hbm
    layers = s.layers / pp
    flops = micro * (
        2 * layer_matmul_weights(s) * layers / tp
        + 4 * s.heads / tp * s.head_dim * context_tokens * layers
        + 2 * s.h * s.vocab / tp
    )
    compute_s = flops / price.flops
    prefill_s = 0.0
    prompts = 0.0
    if requests is not None and requests.prompt:
        # the prompts of the micro-batch's replaced requests, through this stage
        prompts = micro / requests.response * requests.prompt
        prefill_s = prompts * _prefill_flops(s, requests.prompt, layers, tp) / price.flops
    tp_s = 0.0
    if tp > 1:  # two all-reduces a layer of every token's activations, prompts' too
        per_node = min(tp, n_gpus_per_node)
        tp_s = 2 * layers * price.all_reduce(tp, per_node, (micro + prompts) * s.h * 2)
    launches = layers * 6 * KERNEL_LAUNCH_S / 4
    if alloc.backend == "vllm":  # mixed into the step, beside its weight reads
        stage = max(memory_s, compute_s + prefill_s) + tp_s + launches
    else:  # batches of their own between decode steps
        stage = max(memory_s, compute_s) + prefill_s + tp_s + launches
    # pp stages each take one micro-batch a stage time: a step of the instance's batch.
    step = pp * stage
    per_instance = batch / step
    return DecodeThroughput(
        tokens_per_s=per_instance * instances,
        per_instance=per_instance,
        batch=batch,
        bound="memory" if memory_s >= compute_s else "compute",
        step_s=step,
        kv_capacity_tokens=capacity,
        kv_limited=batch < wanted,
        prefill_s=pp * prefill_s,
    )


def _server(spec: ModelAllocation | str, what: str, instead: str) -> ModelAllocation:
    """``spec`` as an inference engine's layout, or an error saying ``what`` models one
    and that ``instead`` prices a training backend."""
    alloc = as_allocation(spec)
    if not alloc.is_inference:
        raise AllocationError(
            f"{what} models an inference engine; {alloc.backend} trains",
            str(alloc),
            hint=f"use {instead} for fsdp, megatron and archon, or give sglang or vllm",
        )
    return alloc


def _prefill_flops(s: Sizes, length: int, layers: float, tp: int) -> float:
    """FLOPs of one token of a ``length``-token sequence prefilled through ``layers``
    layers on one of ``tp`` GPUs: its weights, and causal attention over half the
    sequence on average (query-key and attention-value, 2 FLOPs each)."""
    return (
        2 * layer_matmul_weights(s) * layers / tp + 2 * s.heads / tp * s.head_dim * length * layers
    )


def prefill_seconds(
    spec: ModelAllocation | str,
    model: ModelShape | Mapping[str, Any],
    *,
    gpu: str | Hardware,
    sequences: int,
    sequence_tokens: int,
    n_gpus_per_node: int = 8,
) -> float:
    """Seconds an sglang or vllm engine takes to prefill ``sequences`` sequences of
    ``sequence_tokens`` tokens and nothing else, as a log-probability pass over finished
    trajectories does (AReaL's ``compute_logp`` on an inference teacher): the sequences
    spread over the instances, each instance's pipeline stages working on micro-batches
    at once, every layer's FLOPs at the GPU's sustained rate and its two tensor-parallel
    all-reduces of the tokens' activations. Kernel launches and scheduling are not
    counted."""
    alloc = _server(spec, "prefill_seconds", "step_time(..., forward_only=True)")
    whole("sequences", sequences, example="e.g. the batch's 512 sequences")
    whole("sequence_tokens", sequence_tokens, example="e.g. prompt + response, 4096")
    gpus_per_node(n_gpus_per_node)
    s = sizes(shape_of(model))
    price = Pricer(hardware(gpu))
    par = alloc.parallel
    tp, pp = par.tp_size, par.pp_size
    tokens = math.ceil(sequences / par.dp_size) * sequence_tokens  # the busiest instance's
    compute_s = tokens * _prefill_flops(s, sequence_tokens, s.layers, tp) / price.flops / pp
    tp_s = 0.0
    if tp > 1:
        per_node = min(tp, n_gpus_per_node)
        tp_s = 2 * s.layers / pp * price.all_reduce(tp, per_node, tokens * s.h * 2)
    return compute_s + tp_s

"""Will it fit? The memory check that :func:`areal_conf.validate.validate` runs.

Reads AReaL's own keys from a composed config (a DictConfig or any nested mapping),
turns them into the knobs of :func:`areal_conf.memory.estimate`, estimates every engine
and raises one AllocationError for the first engine, or group of colocated engines, that
does not fit a GPU of ``cluster.gpu_memory_gb``. The hint states a change that would fit,
computed with the same estimate. No Hydra here.

Keys read (all optional; AReaL's defaults otherwise): ``cluster.gpu_memory_gb``,
``enable_offload``, ``<engine>.offload``, ``<engine>.optimizer`` (null: no training),
``<engine>.gradient_checkpointing``, ``<engine>.mb_spec.max_tokens_per_mb``,
``<engine>.attn_impl``, ``<engine>.dtype``, ``<engine>.grad_reduce_dtype``,
``<engine>.megatron.ddp.use_distributed_optimizer``,
``<engine>.megatron.recompute_granularity``, ``sglang.mem_fraction_static``,
``sglang.dtype``, ``vllm.gpu_memory_utilization``, ``vllm.dtype``,
``rollout.max_concurrent_rollouts`` (else ``rollout.consumer_batch_size``, else
``train_dataset.batch_size``), ``train_dataset.max_length`` and ``gconfig.max_new_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from areal_conf.errors import AllocationError
from areal_conf.memory import (
    DEFAULT_GPU_MEMORY_GB,
    GB,
    MemoryEstimate,
    estimate,
    find_fix,
)
from areal_conf.model_shape import ModelShape, model_shape

if TYPE_CHECKING:
    from areal_conf.plan import EnginePlan

# Engines that train unless their config says ``optimizer: null`` (and vice versa).
TRAINING_ROLES: Final = ("actor", "critic")


@dataclass(frozen=True)
class MemoryCheck:
    """Every engine's estimate (None: not estimated) and a sentence when none was."""

    estimates: dict[str, MemoryEstimate | None]
    note: str = ""
    warnings: tuple[str, ...] = ()


def _get(node: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if node is None or not hasattr(node, "get"):
            return default
        node = node.get(key)
    return default if node is None else node


def gpu_memory_gb(cfg: Any) -> float:
    """``cluster.gpu_memory_gb`` (default 80), checked."""
    value = _get(cfg, "cluster", "gpu_memory_gb", default=DEFAULT_GPU_MEMORY_GB)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise AllocationError(
            f"cluster.gpu_memory_gb: must be a positive number of GB (10^9 bytes), got {value!r}",
            value,
            None,
            hint="e.g. cluster.gpu_memory_gb=80 for an 80 GB GPU",
        )
    return float(value)


def engine_knobs(cfg: Any, name: str, is_inference: bool, backend: str) -> dict[str, Any]:
    """The keyword arguments of :func:`estimate` for engine ``name`` of ``cfg``."""
    node = cfg.get(name)
    knobs: dict[str, Any] = {"gpu_memory_gb": gpu_memory_gb(cfg)}
    if is_inference:
        server = cfg.get(backend)
        key = "mem_fraction_static" if backend == "sglang" else "gpu_memory_utilization"
        fraction = _get(server, key)
        if fraction is not None:
            knobs["mem_fraction"] = float(fraction)
        knobs["dtype"] = str(_get(server, "dtype", default="bfloat16"))
        concurrent = _get(node, "max_concurrent_rollouts") or _get(node, "consumer_batch_size")
        concurrent = concurrent or _get(cfg, "train_dataset", "batch_size")
        if concurrent is not None:
            knobs["max_concurrent_rollouts"] = int(concurrent)
        knobs["prompt_len"] = int(_get(cfg, "train_dataset", "max_length", default=0))
        knobs["max_new_tokens"] = int(_get(cfg, "gconfig", "max_new_tokens", default=16384))
        return knobs
    has_optimizer_key = node is not None and hasattr(node, "keys") and "optimizer" in node
    if has_optimizer_key:
        knobs["trainable"] = node.get("optimizer") is not None
    else:
        knobs["trainable"] = name in TRAINING_ROLES
    if _get(node, "gradient_checkpointing", default=False):
        granularity = _get(node, "megatron", "recompute_granularity", default="full")
        knobs["recompute"] = "full" if backend != "megatron" or granularity == "full" else "none"
    tokens = _get(node, "mb_spec", "max_tokens_per_mb")
    if tokens is not None:
        knobs["tokens_per_microbatch"] = int(tokens)
    knobs["flash_attention"] = "flash" in str(_get(node, "attn_impl", default="flash_attention_2"))
    knobs["distributed_optimizer"] = bool(
        _get(node, "megatron", "ddp", "use_distributed_optimizer", default=True)
    )
    knobs["dtype"] = str(_get(node, "dtype", default="bfloat16"))
    knobs["grad_reduce_dtype"] = str(_get(node, "grad_reduce_dtype", default="float32"))
    return knobs


def offloaded(cfg: Any, name: str, is_inference: bool) -> bool:
    """A training engine offloads when ``<engine>.offload`` or ``enable_offload`` is set."""
    if is_inference:
        return False
    return bool(_get(cfg, name, "offload", default=False) or _get(cfg, "enable_offload"))


def check_memory(
    cfg: Any,
    engines: Mapping[str, EnginePlan],
    model: Mapping[str, Any] | None,
    n_nodes: int,
    n_gpus_per_node: int,
) -> MemoryCheck:
    """Estimate every enabled engine; raise AllocationError when one does not fit."""
    enabled = {n: e for n, e in engines.items() if e.allocation is not None}
    shape = model_shape(model or {})
    if isinstance(shape, str):
        return MemoryCheck(dict.fromkeys(enabled), "memory not checked: " + shape)
    budget = gpu_memory_gb(cfg) * GB
    estimates: dict[str, MemoryEstimate | None] = {}
    knobs_of: dict[str, dict[str, Any]] = {}
    for name, e in enabled.items():
        alloc = e.allocation
        assert alloc is not None
        knobs = engine_knobs(cfg, name, alloc.is_inference, alloc.backend)
        knobs_of[name] = knobs
        est = estimate(alloc, shape, **knobs)
        estimates[name] = est
        if not est.fits:
            used = sum(x.gpus for x in enabled.values() if not x.colocated_with)
            raise _does_not_fit(name, e, est, shape, knobs, n_nodes, n_gpus_per_node, used)
    _check_shared_gpus(cfg, enabled, estimates, budget)
    return MemoryCheck(estimates, warnings=tuple(_kv_warnings(estimates)))


def _kv_warnings(estimates: Mapping[str, MemoryEstimate | None]) -> list[str]:
    """Inference engines whose KV cache holds fewer tokens than the config asks for."""
    found = []
    for name, est in estimates.items():
        if est is None or est.kv_cache_tokens_needed is None or est.kv_cache_tokens is None:
            continue
        if est.kv_cache_tokens >= est.kv_cache_tokens_needed:
            continue
        found.append(
            f"{name}: the KV cache of an instance holds {est.kv_cache_tokens:,} tokens "
            f"({est.kv_cache_sequences or 0:,} full-length sequences) but "
            f"max_concurrent_rollouts asks for {est.kv_cache_tokens_needed:,}: requests will "
            "wait; more instances, a larger tp or a larger memory fraction give it more room"
        )
    return found


def _does_not_fit(
    name: str,
    e: EnginePlan,
    est: MemoryEstimate,
    shape: ModelShape,
    knobs: Mapping[str, Any],
    n_nodes: int,
    per_node: int,
    used_gpus: int,
) -> AllocationError:
    alloc = e.allocation
    assert alloc is not None
    cap = est.capacity / GB
    if est.kind == "inference":
        key = _fraction_key(e)
        reason = (
            f"{name}: {alloc} needs {est.weights / GB:.1f} GB of weights per GPU but reserves "
            f"{est.total / GB:.1f} GB ({key} of a {cap:g} GB GPU): no room for the KV cache"
        )
    else:
        term, size = est.biggest()
        reason = (
            f"{name}: {alloc} needs {est.total / GB:.1f} GB per GPU but a GPU has {cap:g} GB "
            f"(cluster.gpu_memory_gb); the biggest term is {term.replace('_', ' ')} "
            f"({size / GB:.1f} GB): {est.breakdown()}"
        )
    fix = find_fix(name, alloc, shape, knobs, budget=est.capacity, n_gpus_per_node=per_node)
    if fix is None:
        hint = "no layout of this backend up to 64 times the GPUs fits: use a smaller model"
        if est.kind != "inference":
            hint += ", LoRA, or offload"
    else:
        changes = fix.text()
        if fix.gpus != alloc.world_size and not e.colocated_with:
            needed = used_gpus - alloc.world_size + fix.gpus
            nodes = -(-needed // per_node)
            if nodes > n_nodes:
                changes += f" cluster.n_nodes={nodes}"
        after = fix.estimate
        shown = (
            f"{after.weights / GB:.1f} GB of weights in a {after.total / GB:.1f} GB reservation"
            if after.kind == "inference"
            else f"{after.total / GB:.1f} GB per GPU"
        )
        hint = f"this would fit: {changes} ({shown})"
        if fix.gpus != alloc.world_size:
            hint += f"; it takes {fix.gpus} GPUs instead of {alloc.world_size}"
    return AllocationError(reason, str(alloc), None, hint=hint)


def _check_shared_gpus(
    cfg: Any,
    engines: Mapping[str, EnginePlan],
    estimates: Mapping[str, MemoryEstimate | None],
    budget: float,
) -> None:
    """Colocated engines add up on their GPUs; an offloaded one only while it runs."""
    groups: dict[str, list[str]] = {}
    for name, e in engines.items():
        groups.setdefault(e.colocated_with or name, []).append(name)
    for owner, members in groups.items():
        if len(members) < 2:
            continue
        resident = [m for m in members if not offloaded(cfg, m, _inference(engines[m]))]
        swapped = [m for m in members if m not in resident]

        def total(m: str) -> float:
            est = estimates[m]
            return 0.0 if est is None else est.total

        need = sum(total(m) for m in resident) + max((total(m) for m in swapped), default=0.0)
        if need <= budget:
            continue
        parts = " + ".join(f"{m} {total(m) / GB:.1f}" for m in resident)
        if swapped:
            parts += (
                " + the largest offloaded ("
                + ", ".join(swapped)
                + ") "
                + (f"{max(total(m) for m in swapped) / GB:.1f}")
            )
        trainers = [m for m in resident if not _inference(engines[m])]
        hints = []
        if trainers and len(resident) > 1:
            hints.append("enable_offload=true (training engines leave the GPUs while others run)")
        for m in resident:
            est = estimates[m]
            if est is not None and est.kind == "inference":
                others = need - est.total
                fraction = math.floor((budget - others) / est.capacity * 100) / 100
                if fraction > 0 and fraction * est.capacity > est.weights:
                    key = _fraction_key(engines[m])
                    hints.append(f"{key}={fraction:.2f}")
        hints.append(
            f"or give {', '.join(m for m in members if m != owner)} GPUs of "
            "their own (scheduling_strategy.type=separation)"
        )
        raise AllocationError(
            f"{', '.join(members)} share {owner}'s GPUs and together need {need / GB:.1f} GB "
            f"per GPU ({parts}) but a GPU has {budget / GB:g} GB (cluster.gpu_memory_gb)",
            None,
            None,
            hint="; ".join(hints),
        )


def _inference(e: EnginePlan) -> bool:
    return e.allocation is not None and e.allocation.is_inference


def _fraction_key(e: EnginePlan) -> str:
    assert e.allocation is not None
    if e.allocation.backend == "sglang":
        return "sglang.mem_fraction_static"
    return "vllm.gpu_memory_utilization"

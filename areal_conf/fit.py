"""Will it fit? The memory check that :func:`areal_conf.validation.validate` runs.

Reads AReaL's own keys from a composed config (a DictConfig or any nested mapping),
turns them into the knobs of :func:`areal_conf.memory.estimate`, estimates every engine
and raises one AllocationError for the first engine, or group of colocated engines, that
does not fit a GPU of ``cluster.gpu_memory_gb``. The hint states a change that would fit,
computed with the same estimate. No Hydra here.

Keys read (all optional; AReaL's defaults otherwise): ``cluster.gpu_memory_gb``,
``enable_offload``, ``<engine>.offload``, ``<engine>.optimizer`` (null: no training),
``<engine>.is_critic`` (default: true for the critic),
``<engine>.gradient_checkpointing``, ``<engine>.mb_spec.max_tokens_per_mb``,
``<engine>.attn_impl``, ``<engine>.dtype``, ``<engine>.grad_reduce_dtype``,
``<engine>.megatron.ddp.use_distributed_optimizer``,
``<engine>.megatron.recompute_granularity``, ``sglang.mem_fraction_static``,
``sglang.dtype``, ``vllm.gpu_memory_utilization``, ``vllm.dtype``,
``rollout.max_concurrent_rollouts`` (else ``rollout.consumer_batch_size``, else
``train_dataset.batch_size``), ``train_dataset.max_length`` and ``gconfig.max_new_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from areal_conf.errors import AllocationError
from areal_conf.memory import (
    DEFAULT_GPU_MEMORY_GB,
    GB,
    GroupNeed,
    Member,
    MemoryEstimate,
    find_fix,
    group_need,
)
from areal_conf.model_shape import ModelShape, model_shape
from areal_conf.roles import ROLE

if TYPE_CHECKING:
    from areal_conf.plan import EnginePlan


@dataclass(frozen=True)
class MemoryCheck:
    """Every engine's estimate (None: not estimated) and a sentence when none was."""

    estimates: dict[str, MemoryEstimate | None]
    note: str = ""
    warnings: tuple[str, ...] = ()


def _get(node: Any, *path: str, default: Any = None) -> Any:
    # ``in`` first: a DictConfig's get() of a key its schema lacks builds an exception.
    for key in path:
        if node is None or not hasattr(node, "keys") or key not in node.keys():  # noqa: SIM118  (see above)
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


def engine_knobs(
    cfg: Any, name: str, is_inference: bool, backend: str, gpu_gb: float | None = None
) -> dict[str, Any]:
    """The keyword arguments of :func:`estimate` for engine ``name`` of ``cfg``."""
    node = _get(cfg, name)
    present = set(node.keys()) if node is not None and hasattr(node, "keys") else set()

    def at(key: str, *rest: str, default: Any = None) -> Any:
        if key not in present:
            return default
        return _get(node.get(key), *rest, default=default)

    knobs: dict[str, Any] = {"gpu_memory_gb": gpu_memory_gb(cfg) if gpu_gb is None else gpu_gb}
    if is_inference:
        server = _get(cfg, backend)
        key = "mem_fraction_static" if backend == "sglang" else "gpu_memory_utilization"
        fraction = _get(server, key)
        if fraction is not None:
            knobs["mem_fraction"] = float(fraction)
        knobs["dtype"] = str(_get(server, "dtype", default="bfloat16"))
        concurrent = at("max_concurrent_rollouts") or at("consumer_batch_size")
        dataset = _get(cfg, "train_dataset")
        concurrent = concurrent or _get(dataset, "batch_size")
        if concurrent is not None:
            knobs["max_concurrent_rollouts"] = int(concurrent)
        knobs["prompt_len"] = int(_get(dataset, "max_length", default=0))
        knobs["max_new_tokens"] = int(_get(cfg, "gconfig", "max_new_tokens", default=16384))
        return knobs
    knobs["is_critic"] = bool(at("is_critic", default=name == "critic"))
    if "optimizer" in present:
        knobs["trainable"] = node.get("optimizer") is not None
    else:
        knobs["trainable"] = name in ROLE and ROLE[name].trains
    if at("gradient_checkpointing", default=False):
        granularity = at("megatron", "recompute_granularity", default="full")
        knobs["recompute"] = "full" if backend != "megatron" or granularity == "full" else "none"
    tokens = at("mb_spec", "max_tokens_per_mb")
    if tokens is not None:
        knobs["tokens_per_microbatch"] = int(tokens)
    knobs["flash_attention"] = "flash" in str(at("attn_impl", default="flash_attention_2"))
    knobs["distributed_optimizer"] = bool(
        at("megatron", "ddp", "use_distributed_optimizer", default=True)
    )
    knobs["dtype"] = str(at("dtype", default="bfloat16"))
    knobs["grad_reduce_dtype"] = str(at("grad_reduce_dtype", default="float32"))
    return knobs


def offloaded(cfg: Any, name: str, is_inference: bool, enable_offload: bool = False) -> bool:
    """A training engine offloads when ``<engine>.offload`` or ``enable_offload`` is set."""
    if is_inference:
        return False
    return enable_offload or bool(_get(cfg, name, "offload", default=False))


def check_memory(
    cfg: Any,
    engines: Mapping[str, EnginePlan],
    model: Mapping[str, Any] | None,
    n_nodes: int,
    n_gpus_per_node: int,
) -> MemoryCheck:
    """Estimate every enabled engine; raise AllocationError when a GPU does not fit.

    Engines that share GPUs (colocation) are checked together: the resident ones add
    up, an offloaded one counts only while it runs.
    """
    enabled = {n: e for n, e in engines.items() if e.allocation is not None}
    shape = model_shape(model or {})
    if isinstance(shape, str):
        return MemoryCheck(dict.fromkeys(enabled), "memory not checked: " + shape)
    gpu_gb = gpu_memory_gb(cfg)
    budget = gpu_gb * GB
    enable_offload = bool(_get(cfg, "enable_offload", default=False))
    groups: dict[str, list[Member]] = {}
    for name, e in enabled.items():
        alloc = e.allocation
        assert alloc is not None
        owner = e.owner
        member = Member(
            name,
            alloc,
            engine_knobs(cfg, name, alloc.is_inference, alloc.backend, gpu_gb),
            follows=owner == name or e.inherited_from == owner,
            offloaded=offloaded(cfg, name, alloc.is_inference, enable_offload),
        )
        if owner == name:
            groups.setdefault(owner, []).insert(0, member)
        else:
            groups.setdefault(owner, []).append(member)
    estimates: dict[str, MemoryEstimate | None] = {}
    used = sum(e.gpus for e in enabled.values() if not e.colocated_with)
    for owner, members in groups.items():
        need = group_need(members, shape)
        estimates.update(need.estimates)
        if not need.fits(budget):
            # Engines elsewhere that inherit the owner's backend keep theirs if it changes.
            pinned = [
                (n, str(e.allocation))
                for n, e in enabled.items()
                if e.inherited_from == owner and all(m.name != n for m in members)
            ]
            raise _does_not_fit(
                members, need, shape, budget, n_nodes, n_gpus_per_node, used, pinned
            )
    return MemoryCheck(estimates, warnings=tuple(_kv_warnings(estimates)))


def _does_not_fit(
    members: list[Member],
    need: GroupNeed,
    shape: ModelShape,
    budget: float,
    n_nodes: int,
    per_node: int,
    used_gpus: int,
    pinned: list[tuple[str, str]],
) -> AllocationError:
    cap = budget / GB
    owner = members[0]
    alloc = owner.allocation
    starved = [m for m in members if not need.estimates[m.name].fits]
    if starved and starved[0].allocation.is_inference:
        m = starved[0]
        est = need.estimates[m.name]
        reason = (
            f"{m.name}: {m.allocation} needs {est.weights / GB:.1f} GB of weights per GPU but "
            f"reserves {est.total / GB:.1f} GB ({_fraction_key(m.allocation.backend)} of the "
            f"{cap:g} GB of a GPU): no room for the KV cache"
        )
    else:
        term, size, whose = max(
            ((*need.estimates[m.name].biggest(), m.name) for m in members),
            key=lambda item: item[1],
        )
        if len(members) == 1:
            est = need.estimates[owner.name]
            reason = (
                f"{owner.name}: {alloc} needs {est.total / GB:.1f} GB per GPU but a GPU has "
                f"{cap:g} GB (cluster.gpu_memory_gb); the biggest term is "
                f"{term.replace('_', ' ')} ({size / GB:.1f} GB): {est.breakdown()}"
            )
        else:
            parts = ", ".join(
                f"{m.name} {need.estimates[m.name].total / GB:.1f}"
                + (" (offloaded while the others run)" if m.offloaded else "")
                for m in members
            )
            reason = (
                f"{', '.join(m.name for m in members)} share {owner.name}'s GPUs ({alloc}) and "
                f"together need {need.total / GB:.1f} GB per GPU but a GPU has {cap:g} GB "
                f"(cluster.gpu_memory_gb): {parts}; the biggest term is {whose}'s "
                f"{term.replace('_', ' ')} ({size / GB:.1f} GB)"
            )
    hints: list[str] = []
    fix = find_fix(members, shape, budget=budget, n_gpus_per_node=per_node)
    if fix is not None:
        changes = fix.text()
        if any(key == f"{owner.name}.backend" for key, _ in fix.changes):
            changes += "".join(f" {name}.backend={spec}" for name, spec in pinned)
        if fix.gpus != alloc.world_size:
            nodes = -(-(used_gpus - alloc.world_size + fix.gpus) // per_node)
            if nodes > n_nodes:
                changes += f" cluster.n_nodes={nodes}"
        shown = ", ".join(f"{n} {e.total / GB:.1f}" for n, e in fix.need.estimates.items())
        hint = f"this would fit: {changes} (GB per GPU: {shown})"
        if fix.gpus != alloc.world_size:
            hint += f"; it takes {fix.gpus} GPUs instead of {alloc.world_size}"
        hints.append(hint)
    resident_trainers = [m for m in members if not m.allocation.is_inference and not m.offloaded]
    if len(members) > 1 and resident_trainers:
        swapped = [replace(m, offloaded=True) if m in resident_trainers else m for m in members]
        if group_need(swapped, shape).fits(budget):
            hints.append(
                "or ++enable_offload=true: training engines leave the GPUs while the others run"
            )
    if not hints:
        hints.append(
            f"no {alloc.backend} layout on up to 64 times the GPUs fits: use a smaller "
            "model, LoRA, or offload"
        )
    return AllocationError(reason, str(alloc), None, hint="; ".join(hints))


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


def _fraction_key(backend: str) -> str:
    if backend == "sglang":
        return "sglang.mem_fraction_static"
    return "vllm.gpu_memory_utilization"

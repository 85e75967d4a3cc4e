"""Will it fit? The memory check that :func:`areal_conf.validation.validate` runs.

Turns AReaL's own keys, as :mod:`areal_conf.reading` read them, into the knobs of
:func:`areal_conf.memory.estimate`, estimates every engine and raises one AllocationError
for the first engine, or group of colocated engines, that does not fit a GPU. The hint
states a change that would fit, computed with the same estimate. No Hydra here.

Keys used (all optional; AReaL's defaults otherwise):
``enable_offload``, ``<engine>.offload``, ``<engine>.optimizer`` (null: no training),
``<engine>.is_critic`` (default: true for the critic),
``<engine>.gradient_checkpointing``, ``<engine>.mb_spec.max_tokens_per_mb``,
``<engine>.attn_impl``, ``<engine>.dtype``, ``<engine>.grad_reduce_dtype``,
``<engine>.optimizer_dtype`` (AReaL 2.0's FSDP storage),
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

from areal_conf.allocation import ModelAllocation
from areal_conf.errors import AllocationError
from areal_conf.memory import (
    GB,
    GroupNeed,
    Member,
    MemoryEstimate,
    find_fix,
    group_need,
)
from areal_conf.model_shape import ModelShape
from areal_conf.reading import EngineSection, RunConfig

if TYPE_CHECKING:
    from areal_conf.plan import EnginePlan


@dataclass(frozen=True)
class MemoryCheck:
    """Every engine's estimate (None: not estimated) and a sentence when none was."""

    estimates: dict[str, MemoryEstimate | None]
    note: str = ""
    warnings: tuple[str, ...] = ()
    #: The engines that do not fit, when the check only reports it (``strict=False``).
    problem: AllocationError | None = None


def engine_knobs(
    run: RunConfig, engine: EngineSection, alloc: ModelAllocation, gpu_gb: float
) -> dict[str, Any]:
    """The keyword arguments of :func:`estimate` for one engine of ``run``."""
    knobs: dict[str, Any] = {"gpu_memory_gb": gpu_gb}
    workload = run.workload
    if alloc.is_inference:
        backend = alloc.backend
        fraction = workload.mem_fraction.get(backend)
        if fraction is not None:
            knobs["mem_fraction"] = fraction
        knobs["dtype"] = workload.server_dtype.get(backend, "bfloat16")
        concurrent = (
            engine.max_concurrent_rollouts or engine.consumer_batch_size or workload.batch_size
        )
        if concurrent is not None:
            knobs["max_concurrent_rollouts"] = int(concurrent)
        knobs["prompt_len"] = workload.prompt_len
        knobs["max_new_tokens"] = workload.max_new_tokens
        return knobs
    knobs["is_critic"] = (
        engine.is_critic if engine.is_critic is not None else engine.name == "critic"
    )
    knobs["trainable"] = engine.trainable
    if engine.gradient_checkpointing:
        granularity = engine.recompute_granularity
        knobs["recompute"] = (
            "full" if alloc.backend != "megatron" or granularity == "full" else "none"
        )
    if engine.tokens_per_mb is not None:
        knobs["tokens_per_microbatch"] = engine.tokens_per_mb
    knobs["flash_attention"] = "flash" in engine.attn_impl
    knobs["distributed_optimizer"] = engine.distributed_optimizer
    knobs["dtype"] = str(engine.dtype)
    knobs["grad_reduce_dtype"] = engine.grad_reduce_dtype
    # Where FSDP keeps weights, gradients and Adam moments: optimizer_dtype in AReaL 2.0,
    # the compute dtype in 1.0.
    storage = getattr(engine, run.rules.fsdp_storage_key)
    knobs["fsdp_storage_dtype"] = str(storage)
    return knobs


def offloaded(run: RunConfig, engine: EngineSection, is_inference: bool) -> bool:
    """A training engine offloads when ``<engine>.offload`` or ``enable_offload`` is set
    (a teacher's flag is ``teacher.offload`` in AReaL 2.0)."""
    if is_inference:
        return False
    teacher_flag = engine.name == "teacher" and run.teacher is not None and run.teacher.offload
    return run.workload.enable_offload or engine.offload or teacher_flag


def check_memory(
    run: RunConfig,
    engines: Mapping[str, EnginePlan],
    shape: ModelShape,
    gpu_gb: float,
    n_nodes: int,
    n_gpus_per_node: int,
    memory_from: str = "",
    own_shapes: Mapping[str, ModelShape] | None = None,
    *,
    strict: bool = True,
) -> MemoryCheck:
    """Estimate every enabled engine; raise AllocationError when a GPU does not fit.

    Engines that share GPUs (colocation) are checked together: the resident ones add
    up, an offloaded one counts only while it runs. ``own_shapes`` gives the engines
    that run another model than the actor's (a teacher) their own shape. Without
    ``strict`` the first group that does not fit is returned as ``problem`` instead.
    """
    enabled = {n: e for n, e in engines.items() if e.allocation is not None}
    own = own_shapes or {}
    budget = gpu_gb * GB
    groups: dict[str, list[Member]] = {}
    for name, e in enabled.items():
        alloc = e.allocation
        assert alloc is not None
        owner = e.owner
        section = run.engines[name]
        member = Member(
            name,
            alloc,
            engine_knobs(run, section, alloc, gpu_gb),
            follows=owner == name or e.inherited_from == owner,
            offloaded=offloaded(run, section, alloc.is_inference),
            shape=own.get(name),
        )
        if owner == name:
            groups.setdefault(owner, []).insert(0, member)
        else:
            groups.setdefault(owner, []).append(member)
    estimates: dict[str, MemoryEstimate | None] = {}
    used = sum(e.gpus for e in enabled.values() if not e.colocated_with)
    problem: AllocationError | None = None
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
            error = _does_not_fit(
                members, need, shape, budget, n_nodes, n_gpus_per_node, used, pinned, memory_from
            )
            if strict:
                raise error
            problem = problem or error
    return MemoryCheck(estimates, warnings=tuple(_kv_warnings(estimates)), problem=problem)


def _does_not_fit(
    members: list[Member],
    need: GroupNeed,
    shape: ModelShape,
    budget: float,
    n_nodes: int,
    per_node: int,
    used_gpus: int,
    pinned: list[tuple[str, str]],
    memory_from: str,
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
                f"{cap:g} GB{_source(memory_from)}; the biggest term is "
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
                f"together need {need.total / GB:.1f} GB per GPU but a GPU has {cap:g} GB"
                f"{_source(memory_from)}: {parts}; the biggest term is {whose}'s "
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


def _source(memory_from: str) -> str:
    return f" ({memory_from})" if memory_from else ""


def _fraction_key(backend: str) -> str:
    if backend == "sglang":
        return "sglang.mem_fraction_static"
    return "vllm.gpu_memory_utilization"

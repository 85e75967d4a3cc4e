"""Will it fit? The memory check that :func:`areal_conf.validation.validate` runs.

Turns AReaL's own keys, as :mod:`areal_conf.config.reading` read them, into the knobs of
:func:`areal_conf.perf.memory.estimate`, estimates every engine and makes one AllocationError
for the first engine, or group of colocated engines, that does not fit a GPU (the check
raises it, or warns with it when the GPU's memory is assumed). The hint states a change
that would fit, computed with the same estimate and passed by the whole check (a
:data:`Recheck` that the validation gives). No Hydra here.

Keys used (all optional; AReaL's defaults otherwise):
``<engine>.offload`` and ``teacher.offload`` (the engines AReaL offloads between the
phases of a step leave the GPUs while the others run, as do an actor and a rollout that
share GPUs), ``<engine>.optimizer`` (null: no training),
``<engine>.is_critic`` (default: true for the critic),
``<engine>.gradient_checkpointing``, ``<engine>.mb_spec.max_tokens_per_mb``,
``<engine>.attn_impl``, ``<engine>.dtype``, ``<engine>.grad_reduce_dtype`` (FSDP;
Megatron: ``megatron.ddp.grad_reduce_in_fp32``),
``<engine>.optimizer_dtype`` (AReaL 2.0's FSDP storage),
``<engine>.megatron.ddp.use_distributed_optimizer``,
``<engine>.megatron.recompute_granularity``, ``<engine>.archon.ac_mode`` and
``selective_ac_option``, ``sglang.mem_fraction_static``,
``sglang.dtype``, ``vllm.gpu_memory_utilization``, ``vllm.dtype``,
``rollout.max_concurrent_rollouts`` (else ``rollout.consumer_batch_size``, else 1: rollouts,
each of ``gconfig.n_samples`` sequences), ``train_dataset.max_length`` and
``gconfig.max_new_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from areal_conf.config.run_config import EngineSection, RunConfig
from areal_conf.errors import AllocationError
from areal_conf.hints import Hint
from areal_conf.hints import fix as fix_of
from areal_conf.model.hardware import HARDWARE, Hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.memory import DEFAULT_MEM_FRACTION, GB, MemoryEstimate, term_label
from areal_conf.perf.memory_fixes import (
    FRACTION_KEY,
    Fix,
    GroupNeed,
    Member,
    Verdict,
    find_fix,
    group_need,
)
from areal_conf.perf.speed import memory_recompute
from areal_conf.perf.workload import concurrent_sequences
from areal_conf.spec.allocation import ModelAllocation

if TYPE_CHECKING:
    from areal_conf.plan.plan import EnginePlan


@dataclass(frozen=True)
class Outcome:
    """What the whole check says of a config with a fix's overrides: ``passed``, with
    ``more`` overrides it needed besides (the fix of another group of engines that did
    not fit either); ``reason`` of a refusal; ``final``: refused, and no other fix of
    this group would pass either."""

    passed: bool
    more: tuple[tuple[str, str], ...] = ()
    reason: str = ""
    final: bool = False


#: Runs the whole check on the config with these overrides, while the group of engines
#: of ``owner`` is being fixed.
Recheck = Callable[[str, tuple[str, ...]], Outcome]


@dataclass(frozen=True)
class MemoryCheck:
    """Every engine's estimate (None: not estimated) and a sentence when none was."""

    estimates: dict[str, MemoryEstimate | None]
    note: str = ""
    warnings: tuple[str, ...] = ()
    #: The first group of engines that does not fit (the first that is an error when
    #: one is): an error when ``fatal``, else what a warning says (the GPU's memory was
    #: assumed and a GPU areal-conf knows would hold it).
    problem: AllocationError | None = None
    fatal: bool = False
    #: The engine whose GPUs the problem is on, and the overrides of the problem's fix
    #: (each passed by the recheck): () when it has none.
    owner: str = ""
    fix: tuple[tuple[str, str], ...] = ()


def largest_gpu() -> Hardware:
    """The GPU with the most memory of those areal-conf knows (``HARDWARE``)."""
    return max(HARDWARE.values(), key=lambda h: h.hbm_gb)


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
        knobs["max_concurrent_rollouts"] = concurrent_sequences(engine, workload)
        knobs["prompt_len"] = workload.prompt_len
        knobs["max_new_tokens"] = workload.max_new_tokens
        return knobs
    knobs["is_critic"] = (
        engine.is_critic if engine.is_critic is not None else engine.name == "critic"
    )
    knobs["trainable"] = engine.trainable
    knobs["recompute"] = memory_recompute(engine.recompute(alloc.backend))
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
    if engine.use_lora:  # only the adapters train
        knobs["lora_rank"] = engine.lora_rank
    return knobs


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
    assumed: bool = False,
    recheck: Recheck | None = None,
    fixing: tuple[str, ...] = (),
) -> MemoryCheck:
    """Estimate every enabled engine and find the first group that does not fit a GPU.

    Engines that share GPUs (colocation) are checked together: the resident ones add
    up, an offloaded one counts only while it runs. ``own_shapes`` gives the engines
    that run another model than the actor's (a teacher) their own shape. When the GPU's
    memory is ``assumed``, a group is an error only when it would not fit the largest
    GPU areal-conf knows either (else a warning). The problem's fix is the first
    candidate that ``recheck`` passes (unchecked without one); a group whose owner is in
    ``fixing`` (being fixed by a recheck further out) gets none.
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
        knobs = engine_knobs(run, section, alloc, gpu_gb)
        if e.colocated_with and not e.fork:
            knobs["own_process"] = False  # it runs in its target's processes
        member = Member(
            name,
            alloc,
            knobs,
            follows=owner == name or e.inherited_from == owner,
            offloaded=run.leaves_gpus(name),
            shape=own.get(name),
            full_recompute=section.full_recompute(alloc.backend),
        )
        if owner == name:
            groups.setdefault(owner, []).insert(0, member)
        else:
            groups.setdefault(owner, []).append(member)
    estimates: dict[str, MemoryEstimate | None] = {}
    failing: list[tuple[str, GroupNeed, GroupNeed | None]] = []  # owner, need, at largest
    for owner, members in groups.items():
        need = group_need(members, shape)
        estimates.update(need.estimates)
        if need.fits(budget):
            continue
        largest = None
        if assumed:
            big = largest_gpu().hbm_gb
            largest = group_need([_on_gpu(m, big) for m in members], shape)
            if largest.fits(big * GB):
                largest = None  # a GPU areal-conf knows holds it: only a warning
        failing.append((owner, need, largest))
    warnings = tuple(_kv_warnings(estimates))
    if not failing:
        return MemoryCheck(estimates, warnings=warnings)
    fatal = [f for f in failing if not assumed or f[2] is not None]
    owner, need, largest = (fatal or failing)[0]
    members = groups[owner]
    # Engines elsewhere that inherit the owner's backend keep theirs if it changes.
    pinned = tuple(
        (f"{n}.backend", str(e.allocation))
        for n, e in enabled.items()
        if e.inherited_from == owner and all(m.name != n for m in members)
    )
    used = sum(e.gpus for e in enabled.values() if not e.colocated_with)
    where = _gpu_text(gpu_gb, memory_from)
    if largest is not None:
        gpu = largest_gpu()
        where = f"the largest GPU areal-conf knows ({gpu.name}) has {gpu.hbm_gb:g} GB"
    fitting = _Fitting(members, shape, budget, n_nodes, n_gpus_per_node, used, pinned)
    if owner in fixing:
        # A recheck further out is fixing this group and reads only the reason.
        recheck = None
        fix = None
    else:
        fix = fitting.fix(recheck, owner)
    error = _does_not_fit(
        members,
        largest or need,
        shape,
        where,
        fix,
        fitting.refused,
        recheck,
        owner,
        budget,
        run.workload.enable_offload,
    )
    if largest is not None and fix is not None:
        error = error.with_hint(
            (error.advice or Hint(())).then(
                "; ",
                f"a GPU's memory is not given: the fix is for {gpu_gb:g} GB, "
                "AREAL_CONF_GPU_MEMORY_GB=<GB> gives yours",
            )
        )
    return MemoryCheck(
        estimates,
        warnings=warnings,
        problem=error,
        fatal=bool(fatal),
        owner=owner,
        fix=fix.changes if fix is not None else (),
    )


def _on_gpu(member: Member, gpu_gb: float) -> Member:
    """``member`` on a GPU of ``gpu_gb`` GB (an inference server reserves a share of it)."""
    return replace(member, knobs={**member.knobs, "gpu_memory_gb": gpu_gb})


def _gpu_text(gpu_gb: float, memory_from: str) -> str:
    return f"a GPU has {gpu_gb:g} GB" + (f" ({memory_from})" if memory_from else "")


@dataclass
class _Fitting:
    """The search for a fix of one group: the candidates of :func:`find_fix`, each
    completed with what the rest of the config needs and checked by a recheck."""

    members: list[Member]
    shape: ModelShape
    budget: float
    n_nodes: int
    per_node: int
    used_gpus: int
    pinned: tuple[tuple[str, str], ...]
    #: The first candidate that fit memory but the check refused, and why.
    refused: tuple[Fix, str] | None = None

    def complete(self, fix: Fix) -> Fix:
        """``fix`` with the backends of engines that inherit the owner's and keep theirs,
        and the nodes a layout on more GPUs needs."""
        owner = self.members[0]
        alloc = owner.allocation
        more: list[tuple[str, str]] = []
        if any(key == f"{owner.name}.backend" for key, _ in fix.changes):
            more += self.pinned
        if fix.gpus != alloc.world_size:
            nodes = -(-(self.used_gpus - alloc.world_size + fix.gpus) // self.per_node)
            if nodes > self.n_nodes:
                more.append(("cluster.n_nodes", str(nodes)))
        return fix.plus(more)

    def fix(self, recheck: Recheck | None, owner: str) -> Fix | None:
        def accept(candidate: Fix) -> Verdict:
            full = self.complete(candidate)
            if recheck is None:
                return Verdict(full)
            outcome = recheck(owner, full.overrides())
            if outcome.passed:
                return Verdict(full.plus(outcome.more))
            if self.refused is None:
                self.refused = (full, outcome.reason)
            return Verdict(None, outcome.final)

        return find_fix(
            self.members,
            self.shape,
            budget=self.budget,
            n_gpus_per_node=self.per_node,
            accept=accept,
        )


def _does_not_fit(
    members: list[Member],
    need: GroupNeed,
    shape: ModelShape,
    where: str,
    fix: Fix | None,
    refused: tuple[Fix, str] | None,
    recheck: Recheck | None,
    owner_name: str,
    budget: float,
    offload_on: bool,
) -> AllocationError:
    """The error for a group that does not fit (``need``, against a GPU as ``where``
    says), with ``fix`` or the offload that would fit ``budget``."""
    owner = members[0]
    alloc = owner.allocation
    starved = [m for m in members if not need.estimates[m.name].fits]
    if starved and starved[0].allocation.is_inference:
        reason = _server_problem(starved[0], need.estimates[starved[0].name], where)
    else:
        term, size, whose = max(
            ((*need.estimates[m.name].biggest(), m.name) for m in members),
            key=lambda item: item[1],
        )
        if len(members) == 1:
            est = need.estimates[owner.name]
            reason = (
                f"{owner.name}: {alloc} needs {est.total / GB:.1f} GB per GPU but {where}; "
                f"the biggest term is {term_label(term)} ({size / GB:.1f} GB): "
                f"{est.breakdown()}"
            )
        else:
            parts = ", ".join(
                f"{m.name} {need.estimates[m.name].total / GB:.1f}"
                + (" (offloaded while the others run)" if m.offloaded else "")
                for m in members
            )
            reason = (
                f"{', '.join(m.name for m in members)} share {owner.name}'s GPUs ({alloc}) and "
                f"together need {need.total / GB:.1f} GB per GPU but {where}: {parts}; the "
                f"biggest term is {whose}'s {term_label(term)} ({size / GB:.1f} GB)"
            )
    hint = Hint(())
    if fix is not None:
        shown = ", ".join(f"{n} {e.total / GB:.1f}" for n, e in fix.need.estimates.items())
        remark = f" (GB per GPU: {shown})"
        if fix.gpus != alloc.world_size:
            remark += f"; it takes {fix.gpus} GPUs instead of {alloc.world_size}"
        fits = fix_of(*fix.hydra_overrides(), lead="this would fit: ", remark=remark, quoted=True)
        hint = hint.then("; ", fits)
    offload = _offload(members, shape, budget, recheck, owner_name, offload_on)
    if offload:
        hint = hint.then(
            "; ",
            fix_of(
                *offload,
                lead="or ",
                remark=": training engines leave the GPUs while the others run",
            ),
        )
    if not hint.options:
        if refused is not None:
            first, why = refused
            hint = hint.then(
                "; ",
                f"no change areal-conf tries passes the whole check: the first that fits "
                f"memory, on {first.gpus} GPUs, is refused ({why})",
            )
        else:
            hint = hint.then(
                "; ",
                f"no {alloc.backend} layout on up to 64 times the GPUs fits: use a smaller "
                "model, LoRA, or offload",
            )
    return AllocationError(reason, str(alloc), None, hint=hint)


#: The engines PPOTrainer can offload by a flag of their own, and that flag
#: (``areal/trainer/rl_trainer.py:155-171``).
OFFLOAD_KEYS: Final = {name: f"{name}.offload" for name in ("actor", "critic", "ref", "teacher")}


def _offload(
    members: list[Member],
    shape: ModelShape,
    budget: float,
    recheck: Recheck | None,
    owner: str,
    offload_on: bool,
) -> tuple[str, ...]:
    """The offload flags (``++critic.offload=true``, with ``++enable_offload=true`` when it
    is off, and what the check needs besides) of the fewest resident training engines,
    largest first, whose offloading makes the group fit and that the check takes; else
    ()."""
    if len(members) < 2:
        return ()
    need = group_need(members, shape)
    resident = sorted(
        (m for m in members if m.name in OFFLOAD_KEYS and not m.offloaded),
        key=lambda m: -need.estimates[m.name].total,
    )
    for count in range(1, len(resident) + 1):
        chosen = {m.name for m in resident[:count]}
        swapped = [replace(m, offloaded=True) if m.name in chosen else m for m in members]
        if group_need(swapped, shape).fits(budget):
            break
    else:
        return ()
    change: tuple[tuple[str, str], ...] = tuple(
        (f"++{OFFLOAD_KEYS[m.name]}", "true") for m in resident[:count]
    )
    if not offload_on:
        change += (("++enable_offload", "true"),)
    if recheck is not None:
        outcome = recheck(owner, tuple(f"{k}={v}" for k, v in change))
        if not outcome.passed:
            return ()
        change += outcome.more
    return tuple(f"{k}={v}" for k, v in change)


def _server_problem(member: Member, est: MemoryEstimate, where: str) -> str:
    """Why an inference server does not fit: its weights leave no KV cache, its KV cache
    holds less than one request, or (vLLM) its fraction is not free beside its CUDA
    context and NCCL buffers."""
    name, alloc = member.name, member.allocation
    key = FRACTION_KEY[alloc.backend]
    if est.total > est.capacity:
        return (
            f"{name}: {alloc} takes {est.total / GB:.1f} GB per GPU ({key} of the GPU, "
            f"{est.reserved / GB:.1f} GB, beside its CUDA context and NCCL buffers) but "
            f"{where}: vLLM refuses to start when that fraction of the GPU is not free"
        )
    fraction = member.knobs.get("mem_fraction") or DEFAULT_MEM_FRACTION[alloc.backend]
    if est.weights >= est.reserved:
        return (
            f"{name}: {alloc} needs {est.weights / GB:.1f} GB of weights per GPU but "
            f"reserves {est.reserved / GB:.1f} GB ({key} {fraction:g}; {where}): no room for "
            "the KV cache"
        )
    prompt = member.knobs.get("prompt_len", 0)
    parts = [f"train_dataset.max_length {prompt:,}"] if prompt else []
    parts.append(f"gconfig.max_new_tokens {member.knobs.get('max_new_tokens', 16384):,}")
    return (
        f"{name}: {alloc} has no room for one request's KV cache: it holds "
        f"{est.kv_cache_tokens or 0:,} tokens per instance, one request needs "
        f"{est.request_tokens or 0:,} ({' + '.join(parts)}); its weights take "
        f"{est.weights / GB:.1f} of the {est.reserved / GB:.1f} GB it reserves ({key} "
        f"{fraction:g}; {where})"
    )


def _kv_warnings(estimates: Mapping[str, MemoryEstimate | None]) -> list[str]:
    """Inference engines whose KV cache holds fewer tokens than the config asks for."""
    found = []
    for name, est in estimates.items():
        if est is None or est.kv_cache_tokens_needed is None or est.kv_cache_tokens is None:
            continue
        if est.kv_cache_tokens >= est.kv_cache_tokens_needed:
            continue
        if est.kv_cache_tokens == 0:  # SGLang and vLLM stop at start-up (see perf.memory)
            found.append(
                f"{name}: on a GPU of {est.capacity / GB:g} GB the weights leave no room for "
                "the KV cache: the server would stop at start-up (SGLang: 'Not enough memory', "
                "vLLM: 'No available memory for the cache blocks'); a larger tp, a larger "
                "memory fraction or a GPU with more memory (AREAL_CONF_GPU_MEMORY_GB=<GB> "
                "gives yours) give it room"
            )
            continue
        found.append(
            f"{name}: the KV cache of an instance holds {est.kv_cache_tokens:,} tokens "
            f"({est.kv_cache_sequences or 0:,} full-length sequences) but "
            "max_concurrent_rollouts rollouts of gconfig.n_samples sequences ask for "
            f"{est.kv_cache_tokens_needed:,}: requests will "
            "wait; more instances, a larger tp or a larger memory fraction give it more room"
        )
    return found

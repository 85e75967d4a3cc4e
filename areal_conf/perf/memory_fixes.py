"""Engines that share GPUs: what they need together, and the change that would make them
fit (a layout on more GPUs, recomputation, shorter micro-batches or responses, a smaller
inference memory fraction), each fix checked before it is offered."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from areal_conf.model.shape import ModelShape
from areal_conf.perf.memory import (
    DEFAULT_MEM_FRACTION,
    MAX_MEM_FRACTION,
    MIN_FIX_TOKENS,
    MemoryEstimate,
    estimate,
)
from areal_conf.spec.allocation import ModelAllocation

#: The key of an inference server's memory fraction in AReaL's config
#: (``SGLangConfig.mem_fraction_static``, ``vLLMConfig.gpu_memory_utilization``).
FRACTION_KEY: Final = {
    "sglang": "sglang.mem_fraction_static",
    "vllm": "vllm.gpu_memory_utilization",
}
#: Where a fix changes the length of a response.
MAX_NEW_TOKENS_KEY: Final = "gconfig.max_new_tokens"


@dataclass(frozen=True)
class Member:
    """One engine on a group of GPUs (the owner first, then its colocated engines).

    ``follows``: the engine runs the owner's layout (it is the owner, or its backend is
    inherited from the owner), so a new layout of the owner is its new layout too.
    ``offloaded``: it leaves the GPUs while the others run (AReaL's offload).
    """

    name: str
    allocation: ModelAllocation
    knobs: Mapping[str, Any]
    follows: bool = True
    offloaded: bool = False
    shape: ModelShape | None = None  # its own model when it differs from the group's
    #: The overrides after which it recomputes whole layers (None: turning on
    #: gradient_checkpointing does).
    full_recompute: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class GroupNeed:
    """What a group of engines needs on each of its GPUs."""

    estimates: dict[str, MemoryEstimate]
    total: float  # resident engines, plus the largest offloaded one while it runs

    def fits(self, budget: float) -> bool:
        return self.total <= budget and all(e.fits for e in self.estimates.values())


def group_need(
    members: list[Member],
    shape: ModelShape,
    layout: ModelAllocation | None = None,
    change: Mapping[str, Any] | None = None,
) -> GroupNeed:
    """Estimate every member (with the owner's ``layout`` and the knobs of ``change``,
    when given) and add them up as they share the GPUs.

    A knob of ``change`` reaches the members it is for: ``recompute`` and
    ``tokens_per_microbatch`` the training ones, ``max_new_tokens`` the inference ones,
    ``mem_fraction`` (a pair: backend, fraction) the inference ones of that backend.
    """
    estimates: dict[str, MemoryEstimate] = {}
    for m in members:
        alloc = _follow(m, layout)
        estimates[m.name] = estimate(
            alloc, m.shape or shape, **_changed(m.knobs, alloc, change or {})
        )
    return GroupNeed(estimates, shared_peak(estimates, {m.name for m in members if m.offloaded}))


def shared_peak(estimates: Mapping[str, MemoryEstimate], leaving: Collection[str]) -> float:
    """The most bytes a GPU holds at once when engines share it: the engines that stay
    resident, the CUDA contexts and NCCL buffers of those that leave it (AReaL's offload
    moves tensors, not these), and the rest of the largest of those that leave while the
    others run."""
    stay = sum(
        e.total if name not in leaving else e.cuda_context + e.comm_buffers
        for name, e in estimates.items()
    )
    moved = (
        e.total - e.cuda_context - e.comm_buffers for n, e in estimates.items() if n in leaving
    )
    return stay + max(moved, default=0.0)


def _changed(
    knobs: Mapping[str, Any], alloc: ModelAllocation, change: Mapping[str, Any]
) -> dict[str, Any]:
    out = dict(knobs)
    for key, value in change.items():
        if key == "mem_fraction":
            backend, fraction = value
            if alloc.backend == backend:
                out[key] = fraction
        elif key == "max_new_tokens":
            if alloc.is_inference:
                out[key] = value
        elif not alloc.is_inference:  # recompute is ignored by engines that do not train
            out[key] = value
    return out


def _follow(m: Member, layout: ModelAllocation | None) -> ModelAllocation:
    """The member's allocation once the owner takes ``layout``."""
    if layout is None:
        return m.allocation
    if m.follows or (not m.allocation.is_inference and m.allocation.backend == layout.backend):
        return layout
    if m.allocation.world_size == layout.world_size:
        return m.allocation
    if m.allocation.is_inference and layout.world_size % m.allocation.instance_size == 0:
        from areal_conf.spec.parser import parse_backend

        p = m.allocation.parallel
        instances = layout.world_size // m.allocation.instance_size
        return parse_backend(f"{m.allocation.backend}:d{instances}p{p.pp_size}t{p.tp_size}")
    return m.allocation  # cannot follow: the layout is rejected by the caller


@dataclass(frozen=True)
class Fix:
    """A change that makes a group fit: overrides (key, value) and the need after it.

    AReaL's own keys that the schema may not declare (``gradient_checkpointing``,
    ``mb_spec``) are written ``++key``: Hydra adds or sets them either way.
    """

    changes: tuple[tuple[str, str], ...]
    need: GroupNeed
    gpus: int

    def hydra_overrides(self) -> tuple[str, ...]:
        """The changes as Hydra overrides: a value that is text (a layout) written so that
        Hydra reads it back as it is (a hybrid layout quoted); ``true`` and numbers as
        they are."""
        from areal_conf.overrides import hydra_value

        def value(v: str) -> str:
            return (
                v if v in ("true", "false") or v.replace(".", "", 1).isdigit() else hydra_value(v)
            )

        return tuple(f"{k}={value(v)}" for k, v in self.changes)

    def overrides(self) -> tuple[str, ...]:
        """The changes as Hydra overrides, ``key=value``."""
        return tuple(f"{k}={v}" for k, v in self.changes)

    def plus(self, more: Sequence[tuple[str, str]]) -> Fix:
        """The same fix with ``more`` changes after its own. A key ``more`` sets again
        keeps only that later value: ``more`` was found on the config with this fix
        applied (a second engine's fix counts the nodes the first one's layout takes)."""
        again = {key.lstrip("+~") for key, _ in more}
        kept = tuple(change for change in self.changes if change[0].lstrip("+~") not in again)
        return replace(self, changes=(*kept, *more))


@dataclass(frozen=True)
class Verdict:
    """What the check that a fix must pass said of one: ``fix`` is the candidate (with
    any changes it needed besides) when it passes, None when not; ``final``: refused, and
    no other candidate would pass either."""

    fix: Fix | None
    final: bool = False


def find_fix(
    members: list[Member],
    shape: ModelShape,
    *,
    budget: float,
    n_gpus_per_node: int,
    max_factor: int = 64,
    accept: Callable[[Fix], Verdict] | None = None,
) -> Fix | None:
    """The first of :func:`fix_candidates` that ``accept`` passes (by default the first
    candidate): the change, least disruptive first, after which the group fits ``budget``
    bytes per GPU and which the rest of the check takes. None when nothing tried passes.

    On more GPUs than the group has, a refused candidate ends the candidates on that many
    GPUs, and refusals on ``n_gpus_per_node`` GPU counts in a row end the search: among
    that many consecutive multiples of the group's GPUs one is a whole number of nodes,
    all that AReaL's Slurm scheduler asks, so further counts are refused for a reason
    more GPUs do not remove (the machine of the local scheduler).
    """
    gpus = members[0].allocation.world_size
    refused: list[int] = []  # the GPU counts refused, in order
    for fix in fix_candidates(
        members, shape, budget=budget, n_gpus_per_node=n_gpus_per_node, max_factor=max_factor
    ):
        if refused and fix.gpus == refused[-1]:
            continue
        verdict = accept(fix) if accept is not None else Verdict(fix)
        if verdict.fix is not None:
            return verdict.fix
        if verdict.final:
            return None
        if fix.gpus != gpus:
            refused.append(fix.gpus)
            if len(refused) >= max(1, n_gpus_per_node):
                return None
    return None


def fix_candidates(
    members: list[Member],
    shape: ModelShape,
    *,
    budget: float,
    n_gpus_per_node: int,
    max_factor: int = 64,
) -> Iterator[Fix]:
    """Every change after which the group fits ``budget`` bytes per GPU, least disruptive
    first: recomputation; a memory fraction of a server without room for one request's
    KV cache (the nearest in steps of 0.01, at most :data:`MAX_MEM_FRACTION`); another
    layout of the owner on the same GPUs (more tp or pp, in layout order); fewer tokens
    per micro-batch (halved down to :data:`MIN_FIX_TOKENS`); for a server without room
    for one request, shorter responses (``gconfig.max_new_tokens`` halved, as far); then
    layouts on 2, 3, ...
    ``max_factor`` times the GPUs. Each layout is tried as it is, then with recomputation.
    """
    from areal_conf.spec.layouts import layouts
    from areal_conf.spec.parser import parse_backend

    owner = members[0].allocation
    trainers = [
        m for m in members if not m.allocation.is_inference and m.knobs.get("trainable", True)
    ]
    recompute = {"recompute": "full"}
    needs_recompute = [m for m in trainers if m.knobs.get("recompute", "none") != "full"]
    tries: list[dict[str, Any]] = [{}] + ([recompute] if needs_recompute else [])
    now = group_need(members, shape)
    servers = [m for m in members if m.allocation.is_inference and not now.estimates[m.name].fits]
    model = {
        "num_layers": shape.num_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_kv_heads": shape.num_kv_heads,
        "num_experts": shape.num_experts,
        "max_seq_len": shape.max_seq_len,
    }

    def extra(change: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        if change.get("recompute") == "full":
            return tuple(
                override
                for m in needs_recompute
                for override in (
                    m.full_recompute
                    if m.full_recompute is not None
                    else ((f"++{m.name}.gradient_checkpointing", "true"),)
                )
            )
        return ()

    def relayout(layout: ModelAllocation) -> tuple[tuple[str, str], ...] | None:
        """Overrides that give the group ``layout``; None when a member cannot follow."""
        out = [(f"{members[0].name}.backend", str(layout))]
        for m in members[1:]:
            new = _follow(m, layout)
            if new.world_size != layout.world_size:
                return None
            if not m.follows and new != m.allocation:
                out.append((f"{m.name}.backend", str(new)))
        return tuple(out)

    def layouts_on(gpus: int) -> Iterator[Fix]:
        """The layouts on ``gpus`` GPUs (layout order: pp, tp, cp ascending) that fit,
        each as it is or else with recomputation."""
        for spec in layouts(owner.backend, gpus, model=model, max_tp=n_gpus_per_node):
            layout = parse_backend(spec)
            if layout == owner:
                continue
            overrides = relayout(layout)
            if overrides is None:
                continue
            for change in tries:
                need = group_need(members, shape, layout, change)
                if need.fits(budget):
                    yield Fix((*overrides, *extra(change)), need, gpus)
                    break

    gpus = owner.world_size
    if needs_recompute:
        need = group_need(members, shape, None, recompute)
        if need.fits(budget):
            yield Fix(extra(recompute), need, gpus)
    for backend in dict.fromkeys(m.allocation.backend for m in servers):
        yield from _fraction_fixes(members, shape, budget, backend, gpus)
    yield from layouts_on(gpus)
    if trainers:
        tokens = trainers[0].knobs.get("tokens_per_microbatch") or shape.max_seq_len
        for change in tries:
            t = tokens
            while t is not None and t > MIN_FIX_TOKENS:
                t //= 2
                need = group_need(members, shape, None, {**change, "tokens_per_microbatch": t})
                if need.fits(budget):
                    mb = tuple((f"++{m.name}.mb_spec.max_tokens_per_mb", str(t)) for m in trainers)
                    yield Fix((*mb, *extra(change)), need, gpus)
                    break
    if servers:
        t = int(servers[0].knobs.get("max_new_tokens", 16384))
        while t > MIN_FIX_TOKENS:
            t //= 2
            need = group_need(members, shape, None, {"max_new_tokens": t})
            if need.fits(budget):
                yield Fix(((MAX_NEW_TOKENS_KEY, str(t)),), need, gpus)
                break
    for factor in range(2, max_factor + 1):
        yield from layouts_on(gpus * factor)


def _fraction_fixes(
    members: list[Member], shape: ModelShape, budget: float, backend: str, gpus: int
) -> Iterator[Fix]:
    """The memory fraction of ``backend``'s servers nearest to theirs, in hundredths up
    to :data:`MAX_MEM_FRACTION` (higher first, then lower), with which the group fits."""
    server = next(m for m in members if m.allocation.backend == backend)
    current = server.knobs.get("mem_fraction") or DEFAULT_MEM_FRACTION[backend]
    top = round(MAX_MEM_FRACTION * 100)
    now = round(current * 100)
    for hundredths in [*range(now + 1, top + 1), *range(min(now - 1, top), 0, -1)]:
        need = group_need(members, shape, None, {"mem_fraction": (backend, hundredths / 100)})
        if need.fits(budget):
            yield Fix(((FRACTION_KEY[backend], f"{hundredths / 100:g}"),), need, gpus)
            return

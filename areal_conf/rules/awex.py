"""AWEX on controller v1 (A2-A5): the rollout time-shares the actor's GPUs, so its
layout must fit them."""

from __future__ import annotations

from dataclasses import replace

from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import fix, sentence
from areal_conf.rules.common import SCHEDULER_NAME, v1_awex
from areal_conf.rules.context import Context
from areal_conf.spec.allocation import ModelAllocation


def check_awex_sharing(ctx: Context) -> None:
    """A2-A5: v1 AWEX's rollout runs on exactly the actor's GPUs, and the plan shows it."""
    if not v1_awex(ctx) or "rollout" not in ctx.engines or "actor" not in ctx.engines:
        return
    actor, rollout = ctx.engines["actor"], ctx.engines["rollout"]
    if actor.allocation is None or rollout.allocation is None:
        return
    a, r = actor.allocation, rollout.allocation
    if r.world_size != a.world_size:
        instances = a.world_size // r.instance_size if a.world_size % r.instance_size == 0 else 0
        resized = (
            f"rollout.backend={r.backend}:d{instances}"
            + (f"t{r.parallel.tp_size}" if r.parallel.tp_size > 1 else "")
            + (f"p{r.parallel.pp_size}" if r.parallel.pp_size > 1 else "")
            if instances
            else f"rollout.backend={r.backend}:d{a.world_size}"
        )
        raise AllocationError(
            f"rollout.backend: AWEX (actor.weight_update_mode awex, controller v1) sends the "
            f"weights by CUDA IPC to the rollout on the same GPUs, so the rollout must run on "
            f"exactly the actor's {a.world_size} GPUs; {r} takes {r.world_size}",
            str(r),
            hint=fix(resized),
        )
    if rollout.colocated_with is not None:
        # the scheduler's colocation rules placed it (colocate_2_0): on the actor's GPUs?
        if rollout.owner != actor.owner:
            raise ConfigError(
                f"rollout.scheduling_strategy.target: AWEX needs the rollout on the actor's "
                f"GPUs, but it is colocated with {rollout.colocated_with}, on "
                f"{rollout.owner}'s GPUs, where CUDA IPC cannot reach the actor",
                hint=fix("rollout.scheduling_strategy.target=actor"),
            )
        return
    if ctx.column in ("slurm", "ray"):
        raise ConfigError(
            f"rollout.scheduling_strategy: AWEX needs the rollout on the actor's GPUs, but "
            f"AReaL's {SCHEDULER_NAME[ctx.column]} scheduler gives a separated rollout GPUs of "
            "its own, where "
            "CUDA IPC cannot reach the actor",
            hint=fix(
                "rollout.scheduling_strategy.type=colocation",
                "rollout.scheduling_strategy.target=actor",
            ),
        )
    n = ctx.n
    between = [
        e.name
        for e in ctx.separated()
        if e.name not in ("actor", "rollout") and _created_before(ctx, e.name, "rollout")
    ]
    if a.world_size != n or between:
        why = (
            f"the actor takes {a.world_size} of the machine's {n} GPUs"
            if a.world_size != n
            else f"{', '.join(between)} {'takes' if len(between) == 1 else 'take'} GPUs of "
            "their own in between"
        )
        raise ConfigError(
            "rollout.scheduling_strategy: AWEX needs the rollout on the actor's GPUs; a "
            "separated rollout gets them from AReaL's local scheduler only by wrapping around "
            f"the machine right after the actor, which needs the actor to take all {n} GPUs "
            f"and nothing separated between them, but {why}",
            hint=fix(
                f"actor.backend={a.backend}:d{n}",
                f"rollout.backend={_awex_rollout(r, n)}",
                remark=" (the whole machine for both)",
            )
            if a.world_size != n
            else sentence(
                f"colocate {', '.join(between)} with the actor (",
                fix(
                    f"{between[0]}.scheduling_strategy.type=colocation",
                    f"{between[0]}.scheduling_strategy.target=actor",
                ),
                ")",
            ),
        )
    ctx.engines["rollout"] = replace(
        rollout, colocated_with="actor", gpu_owner="actor", awex_shared=True
    )


def _awex_rollout(r: ModelAllocation, gpus: int) -> str:
    """The rollout's layout on ``gpus`` GPUs, its instances as they are when they fit."""
    size = r.instance_size if gpus % r.instance_size == 0 else 1
    p = r.parallel
    body = f"d{gpus // size}" + (
        (f"p{p.pp_size}" if p.pp_size > 1 else "") + (f"t{p.tp_size}" if p.tp_size > 1 else "")
        if size > 1
        else ""
    )
    return f"{r.backend}:{body}"


def scaled_layout(alloc: ModelAllocation, gpus: int) -> str | None:
    """``alloc`` with its data-parallel size changed to take ``gpus`` GPUs (its other sizes
    kept), or None when they do not divide ``gpus``."""
    from areal_conf.spec.parser import parse_backend

    p = alloc.parallel
    rest = alloc.world_size // p.dp_size
    if gpus % rest or alloc.parallel.etp_size > 1:
        return None
    sizes = {"d": gpus // rest, "p": p.pp_size, "t": p.tp_size, "c": p.cp_size, "e": p.ep_size}
    body = "".join(f"{letter}{size}" for letter, size in sizes.items() if size > 1 or letter == "d")
    try:
        return str(parse_backend(f"{alloc.backend}:{body}"))
    except AllocationError:
        return None


def _created_before(ctx: Context, name: str, other: str) -> bool:
    from areal_conf.rules.engines import creation_order

    order = creation_order(ctx.run, ctx.engines)
    return order.index(name) < order.index(other)

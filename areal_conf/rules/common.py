"""What AReaL 2.0's rules share: how messages quote values and count GPUs, which
engine section a planned engine is, and whether the actor uses v1 AWEX."""

from __future__ import annotations

from typing import Final

from areal_conf.config.run_config import EngineSection
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.context import Context

#: How messages name each scheduler.
SCHEDULER_NAME: Final = {"local": "local", "slurm": "Slurm", "ray": "Ray"}


def quoted(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def gpus_text(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def v1_awex(ctx: Context) -> bool:
    """Controller v1 with AWEX weight updates: actor and rollout time-share the actor's
    GPUs (AReaL does not look at the scheduling strategy for this)."""
    return ctx.run.v1_awex


def engine_section(ctx: Context, e: EnginePlan) -> EngineSection:
    return ctx.run.engines[e.name]


def shape_hint(ctx: Context) -> str:
    """How to give the model's shape, for this kind of config."""
    from areal_conf.model.shape import SHAPE_HINT

    if ctx.run.own_config:
        return (
            "set model.hf_config to the model's config.json, its directory or its Hugging "
            "Face id (or AREAL_CONF_MODEL)"
        )
    return SHAPE_HINT


def own_model(ctx: Context, e: EnginePlan) -> str | None:
    """The model an engine runs when it is not the actor's (a teacher's ``path``)."""
    run = ctx.run
    actor_path = run.actor.path if run.actor is not None else None
    path: object = None
    if e.name == "teacher":
        teacher_path = run.teacher.path if run.teacher is not None else None
        path = teacher_path or run.engines["teacher"].path
    elif e.name not in ("rollout", "actor"):
        path = run.engines[e.name].path
    if isinstance(path, str) and path and path != actor_path:
        return path
    return None

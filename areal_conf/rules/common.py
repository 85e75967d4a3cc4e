"""What AReaL 2.0's rules share: how messages quote values and count GPUs, which
engine section a planned engine is, and whether the actor uses v1 AWEX."""

from __future__ import annotations

from typing import Final

from areal_conf.config.run_config import EngineSection
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.checks import Context

#: How messages name each scheduler.
SCHEDULER_NAME: Final = {"local": "local", "slurm": "Slurm", "ray": "Ray"}


def quoted(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def gpus_text(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def v1_awex(ctx: Context) -> bool:
    """Controller v1 with AWEX weight updates: actor and rollout time-share the actor's
    GPUs (AReaL does not look at the scheduling strategy for this)."""
    actor = ctx.run.actor
    return actor is not None and actor.controller == "v1" and actor.weight_update_mode == "awex"


def engine_section(ctx: Context, e: EnginePlan) -> EngineSection:
    return ctx.run.engines[e.name]

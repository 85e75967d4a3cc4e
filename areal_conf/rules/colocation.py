"""Colocation: an engine on its target's GPUs, the targets AReaL must have created
before it, chains, and the replicas each scheduler in use allows (AReaL 1.0's rule, and
2.0's per scheduler); controller v2 ignoring a rollout's colocation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from areal_conf.config.run_config import EngineSection
from areal_conf.errors import ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.common import SCHEDULER_NAME, engine_section, gpus_text
from areal_conf.rules.context import Context
from areal_conf.rules.engines import (
    ReplicaRule,
    replica_mismatch,
    resolve_colocation,
    strategy_key,
)


def ignore_v2_rollout_colocation(ctx: Context) -> None:
    """C5 (W7): controller v2 starts its rollout servers on their own GPUs whatever the
    scheduling strategy says."""
    for e in ctx.built():
        if e.colocated_with is None or e.controller != "v2":
            continue
        if e.allocation is None or not e.allocation.is_inference:
            continue
        section = e.section or e.name
        ctx.engines[e.name] = replace(e, colocated_with=None)
        ctx.warn(
            f"{section}.scheduling_strategy colocation with {e.colocated_with} is ignored by "
            f"controller v2 ({section}._version v2): its servers start on GPUs of their own, "
            "so the plan places them separately"
        )


def colocate(ctx: Context, replica_rule: ReplicaRule | None = None) -> None:
    """Each colocated engine on its target's GPUs: targets created earlier, chains that
    fork, equal replicas unless ``replica_rule`` says what the scheduler in use allows
    (AReaL 1.0's rule, and 2.0's with each scheduler's)."""
    ctx.engines = resolve_colocation(ctx.run, ctx.engines, replica_rule)


def colocate_2_0(ctx: Context) -> None:
    """C1-C4, C6 and §5's colocation rules, for the scheduler in use."""
    colocate(ctx, lambda e, target, owners: _check_pair(ctx, e, target, owners))


def _check_pair(ctx: Context, e: EnginePlan, target: EnginePlan, owners: Mapping[str, str]) -> None:
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    key = strategy_key(e).rpartition(".")[0]
    chain = f"{e.name} -> {target.name}"
    if target.controller == "v2":
        registered = f"{target.name}-inf" if t.is_inference else f"{target.name}-guard"
        raise ConfigError(
            f"{key}: {chain}: {target.name} runs controller v2 "
            f"({target.section or target.name}._version v2), whose workers AReaL registers as "
            f"{registered}: no {target.name} workers exist to colocate with "
            f"(WorkerNotFoundError when {e.name} is created)",
            hint=either(
                fix(f"{strategy_key(e, 'type')}=separation"),
                ", or ",
                sentence(
                    "controller v1 for ", fix(*(f"{key}=v1" for key in _v1_keys(ctx, e, target)))
                ),
            ),
        )
    engine = engine_section(ctx, e)
    if (
        e.name == "rollout"
        and not e.fork
        and e.controller == "v1"
        and engine.agent_mode != "online"
    ):
        raise ConfigError(
            f"{key}: {chain} with fork false: the rollout then reuses {target.name}'s "
            "processes and registers no rollout workers, and AReaL's eval-rollout, which "
            "colocates with the rollout, fails (WorkerNotFoundError)",
            hint=fix(f"{strategy_key(e, 'fork')}=true"),
        )
    if e.replicas == target.replicas:
        if e.per_worker != target.per_worker:
            raise replica_mismatch(
                e,
                target,
                owners,
                f"with as many workers as {target.name}, each {e.name} worker needs "
                f"{gpus_text(e.per_worker)} but is forked onto one {target.name} worker's "
                f"{target.per_worker}",
            )
    else:
        _different_replicas(ctx, e, target, owners, engine)
    if e.controller == "v2" and target.controller == "v1":
        ctx.warn(
            f"{chain}: {e.name} runs controller v2 colocated with {target.name} on v1: AReaL "
            "forks it onto the v1 workers (its guard API is served there), a combination its "
            "tests do not cover"
        )


def _v1_keys(ctx: Context, e: EnginePlan, target: EnginePlan) -> list[str]:
    """The ``_version`` keys to set to v1 so that ``e`` can colocate onto ``target``: the
    target's, the engine's when it is v2, and the actor's or rollout's partner (the two
    run one controller version)."""
    names = [target.name] + ([e.name] if e.controller == "v2" else [])
    partner = {"actor": "rollout", "rollout": "actor"}.get(target.name)
    if partner is not None and partner in ctx.engines and ctx.engines[partner].controller == "v2":
        names.append(partner)
    keys = []
    for name in dict.fromkeys(names):
        plan = ctx.engines[name]
        keys.append(f"{plan.section or plan.name}._version")
    return keys


def _different_replicas(
    ctx: Context,
    e: EnginePlan,
    target: EnginePlan,
    owners: Mapping[str, str],
    engine: EngineSection,
) -> None:
    """§5: only Slurm and Ray colocate an engine with another number of workers, and only
    an inference engine whose servers cover the target's GPUs in groups within a node."""
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    column, n = ctx.column, ctx.n
    if column == "local":
        raise replica_mismatch(
            e,
            target,
            owners,
            "AReaL's local scheduler colocates only equal replica counts (Replica count mismatch)",
        )
    if column == "null":
        raise replica_mismatch(
            e,
            target,
            owners,
            "only the slurm and ray schedulers colocate different replica counts: set "
            "scheduler.type, or give both engines the same count",
        )
    if not a.is_inference:
        raise replica_mismatch(
            e,
            target,
            owners,
            f"AReaL's {SCHEDULER_NAME[column]} scheduler colocates different replica counts "
            "only for an inference engine",
        )
    gpus_given = engine.specs is None or all(s.gpu != 0 for s in engine.specs)
    problems = []
    if not gpus_given:
        problems.append("its scheduling_spec gpu is 0, so its servers ask for no GPUs")
    if a.world_size != t.world_size:
        problems.append(
            f"its {a.world_size} GPUs (d×t×p) must be exactly {target.name}'s {t.world_size}"
        )
    if n and n % a.instance_size:
        problems.append(
            f"an instance's {a.instance_size} GPUs (t×p) must divide a node's {n}, as the "
            "servers are placed in groups within each of the target's nodes"
        )
    if problems:
        raise replica_mismatch(e, target, owners, "; ".join(problems))

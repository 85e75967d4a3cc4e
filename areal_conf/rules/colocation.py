"""Each engine's workers and their GPUs (G0-G3) and colocation on the scheduler in use
(C1-C6), as AReaL 2.0 creates and places them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from areal_conf.config.run_config import EngineSection
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.checks import Context, colocate
from areal_conf.rules.common import SCHEDULER_NAME, engine_section, gpus_text
from areal_conf.rules.engines import replica_mismatch, replica_text, strategy_key


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


def count_workers(ctx: Context) -> None:
    """§3: AReaL's workers and GPUs per worker for every engine; E5's rule for two
    scheduling_spec entries; G0-G3 for the engines on GPUs of their own."""
    n = ctx.n
    cpu = ctx.run.cluster.cpu_run
    without_spec: list[str] = []
    for e in ctx.built():
        engine = engine_section(ctx, e)
        alloc = e.allocation
        assert alloc is not None
        specs = engine.specs
        key = engine.key("scheduling_spec")
        if specs is not None and len(specs) == 2 and not alloc.is_inference:
            if e.controller == "v2":
                raise ConfigError(
                    f"{key}: 2 entries, but controller v2 takes exactly one",
                    hint=f"keep one entry (the first asks for gpu {specs[0].gpu})",
                )
            if alloc.world_size != 2:
                raise ConfigError(
                    f"{key}: 2 entries, one per worker, but {e.name} runs "
                    f"{replica_text(alloc)} ({alloc}): AReaL's schedulers take one entry for "
                    "all workers, or one per worker",
                    hint=f"keep one entry (the first asks for gpu {specs[0].gpu})",
                )
        workers, per_worker = alloc.replicas, alloc.world_size // alloc.replicas
        if alloc.is_inference and e.controller == "v2" and n > 0 and alloc.instance_size > n:
            if alloc.instance_size % n:
                raise AllocationError(
                    f"{engine.backend_key}: an instance of {alloc.instance_size} GPUs (t×p) is "
                    f"larger than a node ({n} GPUs) but not a whole number of nodes, which "
                    "controller v2 requires",
                    str(alloc),
                    None,
                    hint=f"make t×p a divisor or a multiple of {n}",
                )
            nodes = alloc.instance_size // n
            workers, per_worker = alloc.num_instances * nodes, n
        ctx.engines[e.name] = e = replace(e, workers=workers, gpus_per_worker=per_worker)
        if e.colocated_with:
            continue  # its workers share the target's GPUs; its own gpu is not read
        if cpu:
            _check_cpu_specs(ctx, e, engine)
        elif specs is None:
            without_spec.append(e.section or e.name)
        else:
            _check_gpu_specs(e, engine)
    if without_spec:
        keys = ", ".join(f"{s}.scheduling_spec" for s in without_spec)
        ctx.warn(
            f"no {keys}: AReaL's default scheduling_spec asks for gpu 0, so its scheduler "
            "would start these workers without a GPU; the plan counts the GPUs of their "
            "backend strings; add one entry with gpu 1, e.g. "
            f"+{without_spec[0]}.scheduling_spec=[{{gpu:1}}]"
        )


def _check_gpu_specs(e: EnginePlan, engine: EngineSection) -> None:
    """G1 and G2: what each worker of an engine on its own GPUs asks for."""
    assert e.allocation is not None and engine.specs is not None
    key = engine.key("scheduling_spec")
    for i, spec in enumerate(engine.specs):
        gpu = spec.gpu
        at = f"{key}.{i}.gpu"
        if e.allocation.is_inference:
            if gpu == 0:
                raise AllocationError(
                    f"{key}: gpu 0 starts {e.name}'s servers without a GPU (AReaL gives each "
                    f"server t×p = {e.allocation.instance_size} GPUs only when gpu is above 0)",
                    None,
                    None,
                    hint=f"{at}=1",
                )
            continue
        if gpu != 1:
            what = (
                "its workers get no GPU"
                if gpu == 0
                else f"each rank gets {gpu} GPUs and uses one of them"
            )
            raise AllocationError(
                f"{key}: gpu {gpu}: {what} (a training engine runs one rank per GPU, and AReaL "
                "passes gpu to its scheduler as it is)",
                hint=f"{at}=1",
            )


def _check_cpu_specs(ctx: Context, e: EnginePlan, engine: EngineSection) -> None:
    """G3: on a CPU run every engine on its own asks for no GPU."""
    for i, spec in enumerate(engine.specs or ()):
        if spec.gpu == 0:
            continue
        consequence = {
            "local": "AReaL's local scheduler would give its workers the machine's real GPUs",
            "slurm": "AReaL's Slurm scheduler divides by n_gpus_per_node = 0",
            "ray": "AReaL's Ray scheduler divides by n_gpus_per_node = 0",
        }.get(ctx.column, "AReaL's schedulers would give it GPUs the run does not have")
        v2_servers = e.controller == "v2" and e.allocation is not None and e.allocation.is_inference
        if v2_servers and ctx.column != "local":  # local counts the machine's GPUs, never 0
            consequence = "controller v2 refuses n_gpus_per_node = 0"
        key = engine.key("scheduling_spec")
        raise ConfigError(
            f"{key}: gpu {spec.gpu} on a CPU run (cluster.n_gpus_per_node is 0): {consequence}",
            hint=f"{key}.{i}.gpu=0",
        )


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
            hint=f"{strategy_key(e, 'type')}=separation, or controller v1 for "
            + " ".join(f"{key}=v1" for key in _v1_keys(ctx, e, target)),
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
            hint=f"{strategy_key(e, 'fork')}=true",
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

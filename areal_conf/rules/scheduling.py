"""AReaL 2.0's scheduler rules: ``scheduler.type`` (E6), each engine on the GPUs the
scheduler in use has (local: the machine's; Slurm: whole nodes; Ray), and Ray's
``scheduling_spec``."""

from __future__ import annotations

from typing import Final

from areal_conf.areal.local_gpus import CUDA_ENV
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.awex import scaled_layout
from areal_conf.rules.common import SCHEDULER_NAME, engine_section, gpus_text, quoted
from areal_conf.rules.context import Context

SCHEDULERS: Final = ("local", "slurm", "ray")


def check_scheduler(ctx: Context) -> None:
    """E6: ``scheduler.type`` is null, local, slurm or ray; W1 (null) and W3 (local on
    several nodes)."""
    kind = ctx.run.scheduler_type
    if kind is None:
        ctx.column = "null"
        ctx.warn(
            sentence(
                "scheduler.type is null: AReaL's trainers refuse to start without one ('Unknown "
                "scheduler type: None'), so this plan follows the rules every scheduler "
                "shares; run with ",
                fix("scheduler.type=local"),
                " (one machine), slurm or ray",
            )
        )
        return
    if kind not in SCHEDULERS:
        raise AllocationError(
            f"scheduler.type: {quoted(kind)} is not a scheduler AReaL has",
            kind if isinstance(kind, str) else None,
            hint=either(
                fix("scheduler.type=local", remark=" (one machine)"),
                ", or ",
                fix("scheduler.type=slurm"),
                ", or ",
                fix("scheduler.type=ray"),
            ),
        )
    ctx.column = str(kind)
    if kind == "local":
        ctx.plan_nodes = 1
        if ctx.run.cluster.n_nodes > 1:
            ctx.warn(
                f"scheduler.type local runs on this one machine and does not read "
                f"cluster.n_nodes ({ctx.run.cluster.n_nodes}): the plan has one node of "
                f"{ctx.n} GPUs"
            )
        gpus, declared = ctx.gpus_per_node, ctx.run.cluster.n_gpus_per_node
        if not gpus.from_config and gpus.count != declared:
            ctx.warn(
                sentence(
                    f"cluster.n_gpus_per_node is {declared}, but AReaL's local scheduler does "
                    f"not read it: it has the machine's {gpus_text(gpus.count)} "
                    f"({gpus.source}), as does this plan; ",
                    fix(f"cluster.n_gpus_per_node={gpus.count}"),
                    " says so",
                )
            )


def check_scheduler_gpus(ctx: Context) -> None:
    """§5: each engine on its own GPUs as the scheduler allocates them, and the total
    against what the scheduler has (W2, W8)."""
    if ctx.run.cluster.cpu_run:
        return
    n, column = ctx.n, ctx.column
    separated = ctx.separated()
    for e in separated:
        _check_engine_on_scheduler(ctx, e)
    needed = sum(e.gpus for e in separated)
    if column == "local":
        if needed > n:
            gpus = ctx.gpus_per_node
            parts = " + ".join(f"{e.name} {e.gpus}" for e in separated)
            shrunk = _shrunk(separated, n)
            raise ConfigError(
                f"{gpus.key}: the engines need {needed} GPUs ({parts}) but AReaL's local "
                f"scheduler has {gpus_text(n)} ({gpus.source}): it would hand GPUs out round "
                "robin and put several engines on the same GPUs without saying so",
                hint=sentence(
                    *(
                        (fix(*shrunk, remark=" (fewer data-parallel copies)"), "; or ")
                        if shrunk
                        else ()
                    ),
                    "shrink an engine's layout, colocate engines, "
                    + (
                        f"list {needed} GPUs in {CUDA_ENV} (indices, e.g. "
                        f"{','.join(map(str, range(needed))) if needed <= 16 else '0,1,2,…'}), "
                        if gpus.key == CUDA_ENV
                        else ""
                    )
                    + "or use ",
                    fix("scheduler.type=slurm"),
                    " or ray for several nodes",
                ),
            )
    elif column in ("slurm", "ray"):
        declared = ctx.run.cluster.n_nodes * n
        if needed > declared:
            nodes = -(-needed // n)
            ctx.warn(
                sentence(
                    f"the engines need {needed} GPUs ({nodes} nodes of {n}) but cluster.n_nodes "
                    f"× n_gpus_per_node declares {declared}: AReaL's {SCHEDULER_NAME[column]} "
                    "scheduler does not read cluster.n_nodes and asks for them anyway, so the "
                    "cluster must have them (",
                    fix(f"cluster.n_nodes={nodes}"),
                    " says so)",
                )
            )


def _shrunk(engines: list[EnginePlan], gpus: int) -> tuple[str, ...]:
    """The backends of ``engines`` with fewer data-parallel copies (the most replicated
    first, their other sizes kept) so that together they take at most ``gpus`` GPUs; ()
    when even one copy each does not fit, or a layout cannot be resized."""
    copies = {e.name: e.allocation.parallel.dp_size for e in engines if e.allocation}
    size = {e.name: e.allocation.world_size // copies[e.name] for e in engines if e.allocation}
    while sum(copies[n] * size[n] for n in copies) > gpus:
        most = max((n for n in copies if copies[n] > 1), key=copies.__getitem__, default=None)
        if most is None:
            return ()
        copies[most] -= 1
    changed: list[str] = []
    for e in engines:
        assert e.allocation is not None
        if copies[e.name] == e.allocation.parallel.dp_size:
            continue
        layout = scaled_layout(e.allocation, copies[e.name] * size[e.name])
        if layout is None:
            return ()
        changed.append(f"{e.section or e.name}.backend={layout}")
    return tuple(changed)


def _check_engine_on_scheduler(ctx: Context, e: EnginePlan) -> None:
    alloc = e.allocation
    assert alloc is not None
    n, column = ctx.n, ctx.column
    key = f"{e.section or e.name}.backend"
    per_worker = e.per_worker
    if column == "local" and per_worker > n:
        raise AllocationError(
            f"{key}: a worker of {alloc} needs {per_worker} GPUs but AReaL's local scheduler "
            f"has one machine of {n} ({ctx.gpus_per_node.source})",
            str(alloc),
            hint=sentence(
                f"make t×p at most {n}, or use ",
                fix("scheduler.type=slurm"),
                " or ray for instances spanning nodes",
            ),
        )
    if column == "slurm":
        if alloc.world_size % n:
            fit = (alloc.world_size // n + 1) * n
            layout = scaled_layout(alloc, fit)
            remark = f" (a multiple of {n} GPUs)"
            example = (
                fix(f"{key}={layout}", remark=remark)
                if layout
                else f"a layout on {fit} GPUs{remark}"
            )
            raise AllocationError(
                f"{key}: AReaL's Slurm scheduler allocates only entire nodes: {alloc} takes "
                f"{alloc.world_size} GPUs but a node has {n}",
                str(alloc),
                hint=either(example, ", or ", f"colocate {e.name} with an engine on whole nodes"),
            )
        if alloc.is_inference and e.controller == "v1" and alloc.instance_size > n:
            raise AllocationError(
                f"{key}: an instance of {alloc.instance_size} GPUs (t×p) is larger than a node "
                f"({n}): AReaL's Slurm scheduler starts v1 servers as tasks within one node "
                "(sbatch fails with --ntasks-per-node=0)",
                str(alloc),
                hint=either(
                    f"make t×p at most {n}",
                    ", or ",
                    sentence(
                        fix(f"{e.section or e.name}._version=v2"),
                        " (and the same for the actor), whose servers span nodes",
                    ),
                ),
            )
        if n % per_worker:
            raise AllocationError(
                f"{key}: a worker of {alloc} takes {per_worker} GPUs, which does not divide a "
                f"node's {n}: AReaL's Slurm scheduler packs workers {n} GPUs to a node",
                str(alloc),
                hint=f"make t×p a divisor of {n}",
            )
    if column == "ray":
        if per_worker > n and per_worker % n:
            raise AllocationError(
                f"{key}: a worker of {alloc} takes {per_worker} GPUs, more than a node's {n} "
                "but not a whole number of nodes, which AReaL's Ray scheduler requires",
                str(alloc),
                hint=f"make t×p a divisor or a multiple of {n}",
            )
        if alloc.world_size >= n and alloc.world_size % n:
            ctx.warn(
                f"{e.name}: {alloc} takes {alloc.world_size} GPUs, not a multiple of a node's "
                f"{n}: AReaL's Ray scheduler puts the rest on a partial node (Slurm would "
                "refuse it)"
            )


def check_ray_specs(ctx: Context) -> None:
    """Ray refuses ``additional_bash_cmds`` in a scheduling_spec."""
    if ctx.column != "ray":
        return
    for e in ctx.built():
        engine = engine_section(ctx, e)
        for i, spec in enumerate(engine.specs or ()):
            if spec.bash_cmds:
                key = engine.key("scheduling_spec")
                raise ConfigError(
                    f"{key}: entry {i} has additional_bash_cmds, which AReaL's Ray scheduler "
                    "does not support",
                    hint=either(
                        fix(
                            f"{key}.{i}.additional_bash_cmds=null",
                            remark=" (set the environment up in the Ray image instead)",
                        ),
                        ", or ",
                        fix("scheduler.type=slurm"),
                    ),
                )

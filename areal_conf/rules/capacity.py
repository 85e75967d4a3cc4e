"""The cluster's capacity and placement: separated engines fit ``n_nodes × n`` GPUs (the
rule every scheduler shares), and each gets concrete GPUs on nodes as its scheduler hands
them out."""

from __future__ import annotations

from areal_conf.errors import ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.plan.placement import place, placement_warnings
from areal_conf.rules.context import Context


def capacity_everywhere(ctx: Context) -> None:
    """Separated engines fit the declared cluster, ``n_nodes × n_gpus_per_node`` (AReaL
    1.0's rule, and the rule every scheduler shares)."""
    if ctx.run.cluster.cpu_run:
        return
    separated = ctx.separated()
    needed = sum(e.gpus for e in separated)
    n_nodes, per_node = ctx.run.cluster.n_nodes, ctx.n
    available = n_nodes * per_node
    if needed <= available:
        return
    parts = " + ".join(f"{e.name} {e.gpus}" for e in ctx.placement_order())
    nodes_needed = -(-needed // per_node)
    raise ConfigError(
        f"cluster: the engines need {needed} GPUs ({parts}) but the cluster has {available} "
        f"({n_nodes} node{'s' if n_nodes != 1 else ''} × {per_node} GPUs)",
        hint=either(
            sentence("add nodes (", fix(f"cluster.n_nodes={nodes_needed}"), ")"),
            " or ",
            "shrink an engine's layout",
        ),
    )


def place_engines(ctx: Context) -> None:
    """Concrete GPUs for every separated engine, as the scheduler hands them out."""
    if ctx.run.cluster.cpu_run:
        return
    from areal_conf.plan.placement import place_whole_nodes

    order = [(e.name, e.allocation) for e in ctx.placement_order() if e.allocation is not None]
    per_node = ctx.n
    needed = sum(a.world_size for _, a in order)
    if ctx.column == "local":
        ctx.plan_nodes = 1
        ctx.slots = place(order, 1, per_node)
    elif ctx.column == "slurm":
        ctx.slots, used_nodes = place_whole_nodes(order, per_node)
        ctx.placed_nodes = used_nodes
    else:
        nodes = ctx.plan_nodes
        if ctx.column == "ray":
            nodes = max(nodes, -(-needed // per_node))
            ctx.placed_nodes = nodes
        ctx.slots = place(order, nodes, per_node)
    for text in placement_warnings(order, per_node):
        ctx.warn(text)

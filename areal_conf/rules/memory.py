"""Each engine's memory per GPU against a GPU's memory, engines that share GPUs together
(the estimate is :mod:`areal_conf.perf.memory`; the fit and its fix
:mod:`areal_conf.rules.fit`)."""

from __future__ import annotations

from areal_conf.hints import as_hint
from areal_conf.model.shape import ModelShape, ShapeSource, model_shape, read_source
from areal_conf.rules.common import own_model, shape_hint
from areal_conf.rules.context import Context, gpu_memory
from areal_conf.rules.fit import MemoryCheck, check_memory


def check_engine_memory(ctx: Context) -> None:
    """Every engine's memory per GPU against a GPU's memory."""
    if ctx.run.cluster.cpu_run:
        return
    shape = model_shape(ctx.model, shape_hint(ctx))
    if isinstance(shape, str):
        ctx.memory_note = "memory not checked: " + (
            f"model shape unknown: {ctx.memory_note}; {shape_hint(ctx)}"
            if ctx.memory_note and not ctx.model
            else shape
        )
        ctx.memory = MemoryCheck({n: None for n, e in ctx.engines.items() if e.enabled})
        return
    gpu_gb, memory_from, assumed = gpu_memory(ctx)
    own: dict[str, ModelShape] = {}
    notes: list[str] = []
    for e in ctx.built():
        path = own_model(ctx, e)
        if path is None:
            continue
        found: ShapeSource = read_source(path, f"{e.section or e.name}.path")
        other = model_shape(found.keys) if found.keys else found.missing
        if isinstance(other, str):
            notes.append(f"{e.name}: its model {path!r} is unknown, so the actor's shape is used")
            continue
        own[e.name] = other
    ctx.memory = check_memory(
        ctx.run,
        ctx.engines,
        shape,
        gpu_gb,
        ctx.plan_nodes,
        ctx.n,
        memory_from,
        own,
        assumed=assumed,
        recheck=ctx.recheck,
        fixing=ctx.fixing,
    )
    problem = ctx.memory.problem
    if problem is not None and ctx.memory.fatal:
        raise problem
    if problem is not None:
        # The GPU's memory is an assumption and a GPU areal-conf knows would hold the
        # engines: say what would not fit, reject nothing.
        ctx.warn(
            as_hint(problem.advice or problem.hint).led(
                f"{problem.reason}; if your GPUs have more memory, give it "
                "(AREAL_CONF_GPU_MEMORY_GB=<GB>); otherwise "
            )
        )
    for text in (*notes, *ctx.memory.warnings):
        ctx.warn(text)

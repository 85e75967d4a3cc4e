"""Each engine's memory per GPU against a GPU's memory, engines that share GPUs together
(the estimate is :mod:`areal_conf.perf.memory`; the fit and its fix
:mod:`areal_conf.rules.fit`)."""

from __future__ import annotations

from areal_conf.hints import as_hint
from areal_conf.model.shape import model_shape
from areal_conf.rules.common import shape_hint
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
    own = ctx.own_shapes  # read by the model rule
    notes = [
        f"{name}: its model {path!r} is unknown, so the actor's shape is used"
        for name, path in ctx.own_unknown.items()
    ]
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

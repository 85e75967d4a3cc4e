"""Each training engine's predicted step time, the plan's ``s/step`` column (the model is
:mod:`areal_conf.perf.speed`), and the RL step of an RL config
(:mod:`areal_conf.perf.rl_step`); never refuses a config."""

from __future__ import annotations

from areal_conf.errors import AllocationError
from areal_conf.model.shape import ModelShape, model_shape
from areal_conf.rules.common import own_model
from areal_conf.rules.context import Context


def predict_step_times(ctx: Context) -> None:
    """Each training engine's predicted seconds a training step, when the model's shape
    and the batch are known (:mod:`areal_conf.perf.speed`). Never rejects a config."""
    from areal_conf.perf.speed import TrainingStep, describe_steps, gpu_for_speed, training_step

    if ctx.run.cluster.cpu_run:
        return
    shape = model_shape(ctx.model) if ctx.model else None
    if not isinstance(shape, ModelShape):
        return
    gpu, said = gpu_for_speed(ctx.settings.gpu)
    timed: dict[str, TrainingStep] = {}
    for e in ctx.built():
        section = ctx.run.engines.get(e.name)
        if e.allocation is None or e.allocation.is_inference or section is None:
            continue
        if own_model(ctx, e) is not None:
            continue  # another model (a teacher's): its shape is not the actor's
        step = training_step(ctx.run, section, ctx.settings.mean_response_tokens)
        if isinstance(step, str):
            continue
        try:
            ctx.step_seconds[e.name] = step.predict(
                e.allocation, shape, gpu, max(1, ctx.n)
            ).batch_seconds
        except AllocationError:  # e.g. more data-parallel ranks than tokens: no time
            continue
        timed[e.name] = step
    if timed:
        ctx.speed_note = describe_steps(timed, said)
    if ctx.run.rl and "actor" in timed:
        from areal_conf.perf.rl_step import RLInputs

        # the plan predicts the step when asked (Plan.rl_step)
        ctx.rl_inputs = RLInputs(ctx.run, shape, gpu, ctx.settings.mean_response_tokens)

"""The model's shape (from the settings, the ``model`` section or ``actor.path``) and the
layout rules it implies for each engine (heads, layers, experts: Megatron-Core's, SGLang's,
vLLM's and AReaL's, in :mod:`areal_conf.spec.model_checks`)."""

from __future__ import annotations

from areal_conf.model.shape import ModelShape, model_shape, read_source
from areal_conf.rules.common import own_model
from areal_conf.rules.context import Context


def read_model(ctx: Context) -> None:
    """The model's shape (from ``--model``/``AREAL_CONF_MODEL``, the ``model`` section of
    areal-conf's configs, or ``actor.path``) and the layout rules it implies; an engine
    that runs a model of its own (a teacher's ``path``) is checked against that model's
    shape, read once here for the rules after (``Context.own_shapes``)."""
    from areal_conf.spec.model_checks import check_model, validate_model

    validate_model(dict(ctx.run.model))  # unknown keys, and every size's value
    validate_model({k: v for k, v in ctx.settings.model.items() if k != "hf_config"})
    source = ctx.reading.model
    ctx.model = dict(source.keys)
    ctx.model_source = source.described
    if source.missing and not ctx.model:
        ctx.memory_note = source.missing
    for e in ctx.built():
        assert e.allocation is not None
        own = own_model(ctx, e)
        if own is None:
            if ctx.model:
                check_model(e.name, e.allocation, ctx.model)
            continue
        found = read_source(own, f"{e.section or e.name}.path")
        if not found.keys:
            ctx.own_unknown[e.name] = own
            continue
        check_model(e.name, e.allocation, found.keys, own)
        shape = model_shape(found.keys)
        if isinstance(shape, ModelShape):
            ctx.own_shapes[e.name] = shape
        else:
            ctx.own_unknown[e.name] = own

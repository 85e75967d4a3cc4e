"""The model's shape (from the settings, the ``model`` section or ``actor.path``) and the
layout rules it implies for each engine (heads, layers, experts: Megatron-Core's, SGLang's,
vLLM's and AReaL's, in :mod:`areal_conf.spec.model_checks`)."""

from __future__ import annotations

from areal_conf.rules.common import own_model
from areal_conf.rules.context import Context


def read_model(ctx: Context) -> None:
    """The model's shape (from ``--model``/``AREAL_CONF_MODEL``, the ``model`` section of
    areal-conf's configs, or ``actor.path``) and the layout rules it implies."""
    from areal_conf.spec.model_checks import check_model, validate_model

    validate_model(dict(ctx.run.model))  # unknown keys, and every size's value
    validate_model({k: v for k, v in ctx.settings.model.items() if k != "hf_config"})
    source = ctx.reading.model
    ctx.model = dict(source.keys)
    ctx.model_source = source.described
    if source.missing and not ctx.model:
        ctx.memory_note = source.missing
    if not ctx.model:
        return
    for e in ctx.built():
        own = own_model(ctx, e)
        if own is not None:
            continue  # checked against its own model below, when that is known
        assert e.allocation is not None
        check_model(e.name, e.allocation, ctx.model)

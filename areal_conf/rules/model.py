"""The model's shape (from the settings, the ``model`` section or ``actor.path``) and the
layout rules it implies for each engine (heads, layers, experts: Megatron-Core's, SGLang's,
vLLM's and AReaL's, in :mod:`areal_conf.spec.model_checks`)."""

from __future__ import annotations

from areal_conf.errors import ConfigError
from areal_conf.hints import Option, either, fix
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


def check_fp8_weights(ctx: Context) -> None:
    """A Megatron engine that trains in FP8 (``megatron.fp8_config`` set) loads weights
    stored in FP8: AReaL's ``MegatronEngine`` reads the model's ``quantization_config`` and
    stops unless its ``quant_method`` is ``fp8``. Checked where areal-conf can read the
    model's ``config.json`` (a local directory, the Hugging Face cache, a known model)."""
    from areal_conf.model.known_models import known_quant_method

    for e in ctx.built():
        section = ctx.run.engines.get(e.name)
        if section is None or e.allocation is None or e.allocation.backend != "megatron":
            continue
        path = own_model(ctx, e) or (ctx.run.actor.path if ctx.run.actor is not None else None)
        if not section.fp8_training or not isinstance(path, str) or not path:
            continue
        method = read_source(path, section.key("path")).quant_method
        if method is None or method == "fp8":
            continue
        said = f"quant_method {method!r}" if method else "no quantization_config"
        release = f"{path}-FP8"
        options: list[Option] = [fix(f"{section.key('megatron.fp8_config')}=null")]
        if known_quant_method(release) == "fp8":
            options = [fix(f"{section.key('path')}={release}"), ", or ", *options]
        raise ConfigError(
            f"{section.key('megatron.fp8_config')}: AReaL's Megatron engine trains in FP8 only "
            f"from weights stored in FP8 (quant_method fp8 in the model's config.json), and "
            f"{path}'s config.json has {said}: the {e.name} would stop as it starts "
            "('FP8 configuration error')",
            hint=either(*options, ", or ", "train a model released in FP8"),
        )

"""FP8 training on a Megatron engine (``megatron.fp8_config``): the weights it starts from
(AReaL's ``MegatronEngine``) and the GPU it runs on (Transformer Engine's recipes)."""

from __future__ import annotations

from collections.abc import Iterator

from areal_conf.config.run_config import EngineSection
from areal_conf.errors import ConfigError
from areal_conf.hints import Option, either, fix
from areal_conf.model.hardware import fp8_gpus, fp8_refused, hardware
from areal_conf.model.shape import read_source
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.common import own_model
from areal_conf.rules.context import Context


def _fp8_engines(ctx: Context) -> Iterator[tuple[EnginePlan, EngineSection]]:
    """The built Megatron engines that train in FP8 (AReaL reads ``megatron.fp8_config``
    on a Megatron engine only: ``areal/engine/megatron_engine.py:350-351``)."""
    for e in ctx.built():
        section = ctx.run.engines.get(e.name)
        if section is None or e.allocation is None or e.allocation.backend != "megatron":
            continue
        if section.fp8_training:
            yield e, section


def check_fp8_weights(ctx: Context) -> None:
    """A Megatron engine that trains in FP8 loads weights stored in FP8: AReaL's
    ``MegatronEngine`` reads the model's ``quantization_config`` and stops unless its
    ``quant_method`` is ``fp8``. Checked where areal-conf can read the model's
    ``config.json`` (a local directory, the Hugging Face cache, a known model)."""
    from areal_conf.model.known_models import known_quant_method

    for e, section in _fp8_engines(ctx):
        path = own_model(ctx, e) or (ctx.run.actor.path if ctx.run.actor is not None else None)
        if not isinstance(path, str) or not path:
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


def check_fp8_gpu(ctx: Context) -> None:
    """The GPU named (``--gpu``, ``AREAL_CONF_GPU``) runs the engine's FP8 recipe:
    Transformer Engine refuses a recipe below (or above) the compute capabilities it
    supports at the first FP8 forward (``check_recipe_support``)."""
    if not ctx.settings.gpu:
        return
    gpu = hardware(ctx.settings.gpu)
    for e, section in _fp8_engines(ctx):
        recipe = section.fp8_recipe
        if recipe is None:  # a recipe Transformer Engine does not name: not checked here
            continue
        refused = fp8_refused(gpu, recipe)
        if not refused:
            continue
        key = section.key("megatron.fp8_config")
        options: list[Option] = [fix(f"{key}=null")]
        for other in ("blockwise", "tensorwise"):
            if not fp8_refused(gpu, other):
                options = [fix(f"{key}.recipe={other}"), ", or ", *options]
                break
        raise ConfigError(
            f"{key}: {refused}: Transformer Engine would stop the {e.name} at its first FP8 step",
            hint=either(*options, ", or ", f"a GPU that runs {recipe} ({fp8_gpus(recipe)})"),
        )

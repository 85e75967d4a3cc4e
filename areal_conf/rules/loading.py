"""What AReaL 2.0's loader refuses before any engine is built: the teacher's layout
(E1-E3), ``_version`` and ``scheduling_spec`` entries and dtypes (E4, E5, E16), and delta
weight updates with more than one PPO minibatch (E7)."""

from __future__ import annotations

from typing import Final

from areal_conf.config.run_config import EngineSection
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.rules.common import quoted
from areal_conf.rules.context import Context
from areal_conf.spec.backends import join_or

CONTROLLERS: Final = ("v1", "v2")


COMPUTE_DTYPES: Final = ("float32", "bfloat16", "float16", "fp32", "bf16", "fp16")


STORAGE_DTYPES: Final = ("float32", "bfloat16", "fp32", "bf16")


def check_load_keys(ctx: Context) -> None:
    """E4 (``_version``), E5 (how many ``scheduling_spec`` entries), E16 (dtypes) for
    every engine section, built or not: AReaL's loader checks them all."""
    for engine in ctx.run.engines.values():
        if engine.controller not in CONTROLLERS:
            raise AllocationError(
                f"{engine.key('_version')}: {quoted(engine.controller)} is not a controller "
                "version",
                engine.controller if isinstance(engine.controller, str) else None,
                hint=either(
                    fix(
                        f"{engine.key('_version')}=v1",
                        remark=" (AReaL's TrainController / RolloutController, the default)",
                    ),
                    " or ",
                    fix(f"{engine.key('_version')}=v2"),
                ),
            )
        _check_spec_count(engine)
        if engine.row is None or engine.row.kind != "training":
            continue
        for key, allowed in (("dtype", COMPUTE_DTYPES), ("optimizer_dtype", STORAGE_DTYPES)):
            value = getattr(engine, key)
            if value not in allowed:
                raise AllocationError(
                    f"{engine.key(key)}: {quoted(value)} is not a dtype AReaL accepts here",
                    value if isinstance(value, str) else None,
                    hint=sentence(
                        f"use {join_or(list(allowed))}, e.g. ",
                        fix(f"{engine.key(key)}={'bfloat16' if key == 'dtype' else 'float32'}"),
                        " (the default)" if key == "dtype" else " (the default) or bfloat16",
                    ),
                )


def _check_spec_count(engine: EngineSection) -> None:
    key = engine.key("scheduling_spec")
    specs = engine.specs
    if specs is None:
        return
    if engine.specs_problem:
        raise AllocationError(
            f"{key}: {engine.specs_problem}",
            hint=f"write it as a list with one entry, e.g. {key}: [{{gpu: 1}}]",
        )
    if len(specs) == 0 or len(specs) >= 3:
        raise ConfigError(
            f"{key}: {len(specs)} entries; AReaL takes 1 (every worker) or 2 (one per "
            "worker, for a v1 training engine of world size 2)",
            hint=f"give one entry, e.g. {key}: [{{gpu: 1}}]"
            if not specs
            else f"keep one entry (the first asks for gpu {specs[0].gpu})",
        )


def check_delta_minibatches(ctx: Context) -> None:
    """E7, the loader's part: delta weight updates need one PPO minibatch."""
    actor = ctx.run.actor
    if actor is None or not actor.enable_delta_weight_update:
        return
    minibatches = 1 if actor.prox_logp_method == "reuse_train_logp" else actor.ppo_n_minibatches
    if minibatches != 1:
        raise ConfigError(
            f"actor.ppo_n_minibatches: is {minibatches}, but actor.enable_delta_weight_update "
            "needs exactly one optimizer step between weight updates",
            hint=either(
                fix("actor.ppo_n_minibatches=1"),
                ", or ",
                fix("actor.enable_delta_weight_update=false"),
            ),
        )

"""What AReaL 2.0's loader refuses before any engine is built: the teacher's layout
(E1-E3), ``_version`` and ``scheduling_spec`` entries and dtypes (E4, E5, E16), and delta
weight updates with more than one PPO minibatch (E7)."""

from __future__ import annotations

from typing import Final

from areal_conf.config.run_config import EngineSection, Teacher
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.rules.checks import Context, same_gpus_layout
from areal_conf.rules.common import quoted
from areal_conf.spec.backends import join_or

CONTROLLERS: Final = ("v1", "v2")


COMPUTE_DTYPES: Final = ("float32", "bfloat16", "float16", "fp32", "bf16", "fp16")


STORAGE_DTYPES: Final = ("float32", "bfloat16", "fp32", "bf16")


def check_teacher(ctx: Context) -> None:
    """E1 (a 1.0 flat teacher), E2 (engine_type), E3 (its subsection); W5, W9."""
    teacher = ctx.run.teacher
    if teacher is None:
        return
    if teacher.flat_keys:
        raise _flat_teacher(teacher)
    if teacher.engine_type not in ("rollout", "train"):
        raise AllocationError(
            f"teacher.engine_type: {quoted(teacher.engine_type)} is not a teacher layout",
            teacher.engine_type if isinstance(teacher.engine_type, str) else None,
            None,
            hint="teacher.engine_type=rollout (an inference teacher under teacher.rollout, "
            "the default) or teacher.engine_type=train (a training teacher under teacher.train)",
        )
    layout = str(teacher.engine_type)
    present = teacher.has_rollout if layout == "rollout" else teacher.has_train
    if not present:
        other = "train" if layout == "rollout" else "rollout"
        has_other = teacher.has_train if layout == "rollout" else teacher.has_rollout
        default = " (the default)" if not teacher.engine_type_given else ""
        fix = (
            f"teacher.engine_type={other} (the teacher has a teacher.{other} section)"
            if has_other
            else "add it, e.g. +teacher.rollout.backend=sglang:d1t2"
            if layout == "rollout"
            else "add it, e.g. +teacher.train.backend=fsdp:d1t4"
        )
        raise AllocationError(
            f"teacher.{layout}: teacher.engine_type is {layout}{default} but the teacher has "
            f"no teacher.{layout} section, which AReaL's loader requires",
            None,
            None,
            hint=fix,
        )
    if teacher.has_rollout and teacher.has_train:
        ctx.warn(
            f"teacher has both teacher.rollout and teacher.train: teacher.engine_type "
            f"({layout}) picks teacher.{layout}, the other is not built"
        )
    if layout == "train":
        ctx.warn(
            "teacher.engine_type train is deprecated: AReaL logs that the train-engine "
            "teacher is a legacy path and asks to migrate to engine_type rollout "
            "(an inference teacher under teacher.rollout)"
        )


def _flat_teacher(teacher: Teacher) -> AllocationError:
    keys = list(teacher.flat_keys)
    backend = teacher.flat_backend if isinstance(teacher.flat_backend, str) else ""
    key = "teacher.backend" if "backend" in keys else f"teacher.{keys[0]}"
    moved = ", ".join(k for k in keys if k not in ("backend", "path"))
    backend_text = f'"{backend}"' if backend else "<a training layout>"
    inference = same_gpus_layout(backend, "inference")
    return AllocationError(
        f"{key}: AReaL 2.0 has no flat teacher: its loader rejects "
        f"{', '.join('teacher.' + k for k in keys[:3])}{', ...' if len(keys) > 3 else ''} "
        "(ConfigKeyError); a teacher is now an inference engine under teacher.rollout or a "
        "training engine under teacher.train",
        hint="AReaL 2.0 nests a training teacher: set teacher.engine_type: train and move the "
        f"engine under teacher.train (teacher.train.backend: {backend_text}, teacher.train.path "
        "(the model, as teacher.path)"
        + (f", and the other engine keys: {moved}" if moved else "")
        + "); teacher.path, offload, rl_loss_weight and distill_loss_weight stay. Or serve "
        f'the teacher for inference: teacher.rollout.backend: "{inference}" (engine_type '
        "rollout, the default)",
    )


def check_load_keys(ctx: Context) -> None:
    """E4 (``_version``), E5 (how many ``scheduling_spec`` entries), E16 (dtypes) for
    every engine section, built or not: AReaL's loader checks them all."""
    for engine in ctx.run.engines.values():
        if engine.controller not in CONTROLLERS:
            raise AllocationError(
                f"{engine.key('_version')}: {quoted(engine.controller)} is not a controller "
                "version",
                engine.controller if isinstance(engine.controller, str) else None,
                None,
                hint=f"{engine.key('_version')}=v1 (AReaL's TrainController / RolloutController, "
                f"the default) or {engine.key('_version')}=v2",
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
                    None,
                    hint=f"use {join_or(list(allowed))}, e.g. {engine.key(key)}=bfloat16 (the "
                    "default)"
                    if key == "dtype"
                    else f"use {join_or(list(allowed))}, e.g. {engine.key(key)}=float32 (the "
                    "default) or bfloat16",
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
            hint="actor.ppo_n_minibatches=1, or actor.enable_delta_weight_update=false",
        )

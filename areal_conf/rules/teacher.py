"""The teacher: where its keys are, as each AReaL version reads them (AReaL 1.0: an engine
section of its own; 2.0: ``teacher.rollout`` or ``teacher.train``, as ``engine_type``
says), and the layout that moves one form to the other."""

from __future__ import annotations

from typing import Literal

from areal_conf.config.run_config import Teacher
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.rules.common import quoted
from areal_conf.rules.context import Context


def check_teacher_layout_1_0(ctx: Context) -> None:
    """AReaL 1.0's teacher is an engine section of its own (``teacher.backend``); its
    loader refuses the 2.0 keys."""
    teacher = ctx.run.teacher
    if teacher is None:
        return
    nested = [
        name
        for name, given in (
            ("engine_type", teacher.engine_type_given),
            ("rollout", teacher.has_rollout),
            ("train", teacher.has_train),
        )
        if given
    ]
    if not nested:
        return
    backend = teacher.train_backend or teacher.rollout_backend
    layout = same_gpus_layout(backend if isinstance(backend, str) else "", "training")
    raise ConfigError(
        f"teacher.{nested[0]}: AReaL 1.0 has no teacher.engine_type, teacher.rollout or "
        "teacher.train (its loader raises ConfigKeyError): its teacher is a training engine "
        "whose keys are directly under teacher",
        hint=either(
            sentence(
                "write the teacher as AReaL 1.0 does: ",
                fix(f"teacher.backend={layout}"),
                " with the engine's keys (path, scheduling_spec, ...) directly under teacher",
            ),
            "; ",
            "or, if your AReaL is 2.0, apply its rules: AREAL_CONF_AREAL_VERSION=2.0",
        ),
    )


def same_gpus_layout(spec: str, kind: Literal["inference", "training"]) -> str:
    """A layout of ``kind`` on the GPUs of ``spec``, for a teacher moved between AReaL
    1.0's form (a training engine) and 2.0's (inference or training): ``spec`` itself when
    it is of that kind, else sglang or fsdp with its tensor parallelism kept and one data
    rank (a server instance) for each tensor-parallel group; a small default when ``spec``
    does not parse."""
    from areal_conf.spec.parser import parse_backend

    backend = "sglang" if kind == "inference" else "fsdp"
    try:
        alloc = parse_backend(spec)
    except AllocationError:
        return f"{backend}:d1t4"
    if alloc.is_inference == (kind == "inference"):
        return str(alloc)
    tp = alloc.parallel.tp_size
    return f"{backend}:d{alloc.world_size // tp}" + (f"t{tp}" if tp > 1 else "")


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
            hint=either(
                fix(
                    "teacher.engine_type=rollout",
                    remark=" (an inference teacher under teacher.rollout, the default)",
                ),
                " or ",
                fix(
                    "teacher.engine_type=train",
                    remark=" (a training teacher under teacher.train)",
                ),
            ),
        )
    layout = str(teacher.engine_type)
    present = teacher.has_rollout if layout == "rollout" else teacher.has_train
    if not present:
        other = "train" if layout == "rollout" else "rollout"
        has_other = teacher.has_train if layout == "rollout" else teacher.has_rollout
        default = " (the default)" if not teacher.engine_type_given else ""
        hint = (
            fix(
                f"teacher.engine_type={other}",
                remark=f" (the teacher has a teacher.{other} section)",
            )
            if has_other
            else sentence("add it, e.g. ", fix("+teacher.rollout.backend=sglang:d1t2"))
            if layout == "rollout"
            else sentence("add it, e.g. ", fix("+teacher.train.backend=fsdp:d1t4"))
        )
        raise AllocationError(
            f"teacher.{layout}: teacher.engine_type is {layout}{default} but the teacher has "
            f"no teacher.{layout} section, which AReaL's loader requires",
            hint=hint,
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

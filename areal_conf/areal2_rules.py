"""AReaL 2.0's rules: the errors it raises at start-up, found at config time, the silent
misallocations it would run, and the warnings about what it would do.

Each rule is one function over the :class:`~areal_conf.checks.Context` of a validation;
:data:`areal_conf.validation.CHECKS` lists them, with their ids, in the order AReaL meets
them: the scheduler, what AReaL's loader checks, PPOTrainer's checks, each engine's
workers and colocation, AWEX's GPU sharing, then the scheduler's GPUs. Every message names
the config key, says why, and gives the fix; each warning is one ``warning:`` line of the
plan. The rules read the config as :mod:`areal_conf.reading` read it, never the raw config.

Terms: a *GPU run* has ``cluster.n_gpus_per_node > 0``; ``n`` is the GPUs per node as the
scheduler in use counts them (on the local scheduler the machine's, see
:mod:`areal_conf.local_gpus`); the *RL rules* are
PPOTrainer's and apply when a config has both an ``actor`` and a ``rollout``; *v1 AWEX* is
``actor._version: v1`` with ``actor.weight_update_mode: awex``, where actor and rollout
time-share the actor's GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from areal_conf.allocation import ModelAllocation
from areal_conf.backends import join_or
from areal_conf.checks import Context, colocate, same_gpus_layout
from areal_conf.engines import replica_mismatch, replica_text, strategy_key
from areal_conf.errors import AllocationError
from areal_conf.local_gpus import CUDA_ENV
from areal_conf.plan import EnginePlan
from areal_conf.run_config import EngineSection, Teacher

SCHEDULERS: Final = ("local", "slurm", "ray")
#: How messages name each scheduler.
SCHEDULER_NAME: Final = {"local": "local", "slurm": "Slurm", "ray": "Ray"}
CONTROLLERS: Final = ("v1", "v2")
COMPUTE_DTYPES: Final = ("float32", "bfloat16", "float16", "fp32", "bf16", "fp16")
STORAGE_DTYPES: Final = ("float32", "bfloat16", "fp32", "bf16")
COLOCATED_UPDATES: Final = ("disk", "awex")  # weight updates that reach a colocated rollout
V1_UPDATES: Final = ("disk", "xccl", "awex")


def _q(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def v1_awex(ctx: Context) -> bool:
    """Controller v1 with AWEX weight updates: actor and rollout time-share the actor's
    GPUs (AReaL does not look at the scheduling strategy for this)."""
    actor = ctx.run.actor
    return actor is not None and actor.controller == "v1" and actor.weight_update_mode == "awex"


def pair_colocated(ctx: Context) -> bool:
    """The actor and the rollout are colocated, as the config writes it (either way)."""
    actor, rollout = ctx.run.actor, ctx.run.rollout
    if actor is None or rollout is None:
        return False
    return (actor.strategy.colocated and actor.strategy.target == "rollout") or (
        rollout.strategy.colocated and rollout.strategy.target == "actor"
    )


def _section(ctx: Context, e: EnginePlan) -> EngineSection:
    return ctx.run.engines[e.name]


# ----------------------------------------------------------------- the scheduler (E6)


def check_scheduler(ctx: Context) -> None:
    """E6: ``scheduler.type`` is null, local, slurm or ray; W1 (null) and W3 (local on
    several nodes)."""
    kind = ctx.run.scheduler_type
    if kind is None:
        ctx.column = "null"
        ctx.warn(
            "scheduler.type is null: AReaL's trainers refuse to start without one ('Unknown "
            "scheduler type: None'), so this plan follows the rules every scheduler shares; "
            "run with scheduler.type=local (one machine), slurm or ray"
        )
        return
    if kind not in SCHEDULERS:
        raise AllocationError(
            f"scheduler.type: {_q(kind)} is not a scheduler AReaL has",
            kind if isinstance(kind, str) else None,
            None,
            hint="scheduler.type=local (one machine), or scheduler.type=slurm, or "
            "scheduler.type=ray",
        )
    ctx.column = str(kind)
    if kind == "local":
        ctx.plan_nodes = 1
        if ctx.run.cluster.n_nodes > 1:
            ctx.warn(
                f"scheduler.type local runs on this one machine and does not read "
                f"cluster.n_nodes ({ctx.run.cluster.n_nodes}): the plan has one node of "
                f"{ctx.n} GPUs"
            )
        gpus, declared = ctx.gpus_per_node, ctx.run.cluster.n_gpus_per_node
        if not gpus.from_config and gpus.count != declared:
            ctx.warn(
                f"cluster.n_gpus_per_node is {declared}, but AReaL's local scheduler does not "
                f"read it: it has the machine's {_gpus(gpus.count)} ({gpus.source}), as does "
                f"this plan; cluster.n_gpus_per_node={gpus.count} says so"
            )


# --------------------------------------------------------- AReaL's loader (E1-E5, E16)


def check_teacher(ctx: Context) -> None:
    """E1 (a 1.0 flat teacher), E2 (engine_type), E3 (its subsection); W5, W9."""
    teacher = ctx.run.teacher
    if teacher is None:
        return
    if teacher.flat_keys:
        raise _flat_teacher(teacher)
    if teacher.engine_type not in ("rollout", "train"):
        raise AllocationError(
            f"teacher.engine_type: {_q(teacher.engine_type)} is not a teacher layout",
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
        None,
        None,
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
                f"{engine.key('_version')}: {_q(engine.controller)} is not a controller version",
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
                    f"{engine.key(key)}: {_q(value)} is not a dtype AReaL accepts here",
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
            None,
            None,
            hint=f"write it as a list with one entry, e.g. {key}: [{{gpu: 1}}]",
        )
    if len(specs) == 0 or len(specs) >= 3:
        raise AllocationError(
            f"{key}: {len(specs)} entries; AReaL takes 1 (every worker) or 2 (one per "
            "worker, for a v1 training engine of world size 2)",
            None,
            None,
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
        raise AllocationError(
            f"actor.ppo_n_minibatches: is {minibatches}, but actor.enable_delta_weight_update "
            "needs exactly one optimizer step between weight updates",
            None,
            None,
            hint="actor.ppo_n_minibatches=1, or actor.enable_delta_weight_update=false",
        )


# -------------------------------------------------------- PPOTrainer's checks (E7-E15)


def check_delta_weight_update(ctx: Context) -> None:
    """E7: what AReaL's delta weight transfer (DTE) requires, in AReaL's order."""
    actor, rollout = ctx.run.actor, ctx.run.rollout
    if actor is None or rollout is None or not actor.enable_delta_weight_update:
        return
    actor_backend = _backend_name(ctx, "actor")
    rollout_backend = _backend_name(ctx, "rollout")
    needs = (
        (
            rollout.strategy.type == "separation",
            "rollout.scheduling_strategy.type",
            f"is {rollout.strategy.type}",
            "a separated rollout",
            "rollout.scheduling_strategy.type=separation",
        ),
        (
            actor.weight_update_delta_method == "adamw",
            "actor.weight_update_delta_method",
            f"is {_q(actor.weight_update_delta_method)}",
            "the adamw method",
            "actor.weight_update_delta_method=adamw",
        ),
        (
            actor.weight_update_anchor_interval >= 0,
            "actor.weight_update_anchor_interval",
            f"is {actor.weight_update_anchor_interval}",
            "an anchor interval of 0 or more",
            "actor.weight_update_anchor_interval=0",
        ),
        (
            actor_backend == "megatron",
            "actor.backend",
            f"is {actor_backend}",
            "a megatron actor",
            "actor.backend=megatron:<layout>",
        ),
        (
            rollout_backend == "sglang",
            "rollout.backend",
            f"is {rollout_backend}",
            "an sglang rollout",
            "rollout.backend=sglang:<layout>",
        ),
        (
            actor.controller == "v2",
            "actor._version",
            f"is {_q(actor.controller)}",
            "controller v2",
            "actor._version=v2 rollout._version=v2",
        ),
        (
            rollout.controller == "v2",
            "rollout._version",
            f"is {_q(rollout.controller)}",
            "controller v2",
            "rollout._version=v2",
        ),
        (
            actor.weight_update_mode == "awex",
            "actor.weight_update_mode",
            f"is {_q(actor.weight_update_mode)}",
            "AWEX weight updates",
            "actor.weight_update_mode=awex",
        ),
        (not actor.use_lora, "actor.use_lora", "is true", "no LoRA", "actor.use_lora=false"),
    )
    for ok, key, have, need, fix in needs:
        if not ok:
            raise AllocationError(
                f"{key}: {have}, but actor.enable_delta_weight_update (delta weight transfer) "
                f"needs {need}",
                None,
                None,
                hint=f"{fix}, or actor.enable_delta_weight_update=false",
            )


def _backend_name(ctx: Context, name: str) -> str:
    e = ctx.engines.get(name)
    if e is not None and e.allocation is not None:
        return e.allocation.backend
    written = ctx.run.engines[name].backend
    return str(written).partition(":")[0] if written else ""


def check_offload(ctx: Context) -> None:
    """E8: AReaL's offload (``enable_offload``) must be on when any engine offloads:
    an actor and a rollout that share GPUs, or an ``offload: true`` engine."""
    run = ctx.run
    if run.workload.enable_offload:
        return
    awex = v1_awex(ctx)
    flags: list[tuple[str, str]] = []  # (the reason, the change that removes it)
    if pair_colocated(ctx) and not awex:
        who = "rollout" if run.rollout is not None and run.rollout.strategy.colocated else "actor"
        flags.append(
            (
                "the actor and the rollout share GPUs (colocation)",
                f"{who}.scheduling_strategy.type=separation",
            )
        )
    actor = run.actor
    if actor is not None and actor.offload and not awex:
        flags.append(("actor.offload is true", "actor.offload=false"))
    for name in ("critic", "ref"):
        engine = run.engines.get(name)
        if engine is not None and engine.offload:
            flags.append((f"{name}.offload is true", f"{name}.offload=false"))
    if run.teacher is not None and run.teacher.offload:
        flags.append(("teacher.offload is true", "teacher.offload=false"))
    if not flags:
        return
    now = "is false" if run.workload.enable_offload_given else "is false (the default)"
    raise AllocationError(
        f"enable_offload: {now}, but "
        + " and ".join(why for why, _ in flags)
        + ": AReaL moves engines off the GPUs between steps only with enable_offload",
        None,
        None,
        hint="enable_offload=true, or " + " ".join(fix for _, fix in flags),
    )


def check_colocated_weight_update(ctx: Context) -> None:
    """E9: a rollout that shares the actor's GPUs gets its weights by disk or AWEX."""
    actor = ctx.run.actor
    if actor is None or not pair_colocated(ctx):
        return
    if actor.weight_update_mode in COLOCATED_UPDATES:
        return
    raise AllocationError(
        f"actor.weight_update_mode: {_q(actor.weight_update_mode)} cannot update a rollout "
        "that shares the actor's GPUs (AReaL allows disk or awex with colocation)",
        None,
        None,
        hint="actor.weight_update_mode=disk, or awex with a megatron actor and an sglang "
        "rollout, or rollout.scheduling_strategy.type=separation",
    )


def check_awex_backends(ctx: Context) -> None:
    """E10: v1 AWEX needs a megatron actor and an sglang rollout."""
    if not v1_awex(ctx):
        return
    for name, needed, example in (
        ("actor", "megatron", "megatron:d"),
        ("rollout", "sglang", "sglang:d"),
    ):
        have = _backend_name(ctx, name)
        if have != needed:
            e = ctx.engines[name]
            body = e.allocation.parallel.body() if e.allocation is not None else "1"
            fix = f"{name}.backend={needed}:{body}" if e.allocation is not None else example
            raise AllocationError(
                f"{name}.backend: actor.weight_update_mode awex on controller v1 needs "
                f"{'a' if needed == 'megatron' else 'an'} {needed} {name}, got {have}",
                None,
                None,
                hint=f"{fix}, or actor.weight_update_mode=disk",
            )


def check_routed_experts(ctx: Context) -> None:
    """E11: only sglang returns the routed experts."""
    rollout = ctx.run.rollout
    if rollout is None or not rollout.return_routed_experts:
        return
    if _backend_name(ctx, "rollout") == "vllm":
        raise AllocationError(
            "rollout.return_routed_experts: vllm cannot return the routed experts",
            None,
            None,
            hint="rollout.backend=sglang:<layout>, or rollout.return_routed_experts=false",
        )


def check_megatron_lora(ctx: Context) -> None:
    """E12: a megatron actor with LoRA cannot update an sglang rollout."""
    actor = ctx.run.actor
    if actor is None or not actor.use_lora:
        return
    if _backend_name(ctx, "actor") == "megatron" and _backend_name(ctx, "rollout") == "sglang":
        raise AllocationError(
            "actor.use_lora: a megatron actor with LoRA cannot update an sglang rollout",
            None,
            None,
            hint="rollout.backend=vllm:<layout>, or actor.use_lora=false, or another actor "
            "backend (actor.backend=fsdp:<layout>)",
        )


def check_controller_versions(ctx: Context) -> None:
    """E13: the actor and the rollout run the same controller version."""
    actor, rollout = ctx.run.actor, ctx.run.rollout
    if actor is None or rollout is None or actor.controller == rollout.controller:
        return
    raise AllocationError(
        f"rollout._version: is {_q(rollout.controller)} but actor._version is "
        f"{_q(actor.controller)}: AReaL runs the actor and the rollout on the same controller "
        "version",
        None,
        None,
        hint=f"rollout._version={actor.controller} or actor._version={rollout.controller}",
    )


def check_v1_weight_update(ctx: Context) -> None:
    """E14: controller v1 updates weights by disk, xccl or awex; W4: v2 picks its own."""
    actor = ctx.run.actor
    if actor is None:
        return
    if actor.controller == "v1" and actor.weight_update_mode not in V1_UPDATES:
        raise AllocationError(
            f"actor.weight_update_mode: {_q(actor.weight_update_mode)} is not a weight update "
            "AReaL knows (it fails after every engine has started)",
            None,
            None,
            hint="actor.weight_update_mode=xccl (the default), disk or awex",
        )
    if actor.controller == "v2" and actor.weight_update_mode_given:
        used = "disk" if actor.use_lora else "awex"
        if actor.weight_update_mode != used:
            ctx.warn(
                f"actor.weight_update_mode is {_q(actor.weight_update_mode)}, but controller "
                f"v2 does not read it for its weight updates: it uses {used} "
                f"({'with' if actor.use_lora else 'without'} LoRA)"
            )


# --------------------------------------------------- workers, GPUs, colocation (§3-§5)


def ignore_v2_rollout_colocation(ctx: Context) -> None:
    """C5 (W7): controller v2 starts its rollout servers on their own GPUs whatever the
    scheduling strategy says."""
    for e in ctx.built():
        if e.colocated_with is None or e.controller != "v2":
            continue
        if e.allocation is None or not e.allocation.is_inference:
            continue
        section = e.section or e.name
        ctx.engines[e.name] = replace(e, colocated_with=None)
        ctx.warn(
            f"{section}.scheduling_strategy colocation with {e.colocated_with} is ignored by "
            f"controller v2 ({section}._version v2): its servers start on GPUs of their own, "
            "so the plan places them separately"
        )


def count_workers(ctx: Context) -> None:
    """§3: AReaL's workers and GPUs per worker for every engine; E5's rule for two
    scheduling_spec entries; G0-G3 for the engines on GPUs of their own."""
    n = ctx.n
    cpu = ctx.run.cluster.cpu_run
    without_spec: list[str] = []
    for e in ctx.built():
        engine = _section(ctx, e)
        alloc = e.allocation
        assert alloc is not None
        specs = engine.specs
        key = engine.key("scheduling_spec")
        if specs is not None and len(specs) == 2 and not alloc.is_inference:
            if e.controller == "v2":
                raise AllocationError(
                    f"{key}: 2 entries, but controller v2 takes exactly one",
                    None,
                    None,
                    hint=f"keep one entry (the first asks for gpu {specs[0].gpu})",
                )
            if alloc.world_size != 2:
                raise AllocationError(
                    f"{key}: 2 entries, one per worker, but {e.name} runs "
                    f"{replica_text(alloc)} ({alloc}): AReaL's schedulers take one entry for "
                    "all workers, or one per worker",
                    None,
                    None,
                    hint=f"keep one entry (the first asks for gpu {specs[0].gpu})",
                )
        workers, per_worker = alloc.replicas, alloc.world_size // alloc.replicas
        if alloc.is_inference and e.controller == "v2" and n > 0 and alloc.instance_size > n:
            if alloc.instance_size % n:
                raise AllocationError(
                    f"{engine.backend_key}: an instance of {alloc.instance_size} GPUs (t×p) is "
                    f"larger than a node ({n} GPUs) but not a whole number of nodes, which "
                    "controller v2 requires",
                    str(alloc),
                    None,
                    hint=f"make t×p a divisor or a multiple of {n}",
                )
            nodes = alloc.instance_size // n
            workers, per_worker = alloc.num_instances * nodes, n
        ctx.engines[e.name] = e = replace(e, workers=workers, gpus_per_worker=per_worker)
        if e.colocated_with:
            continue  # its workers share the target's GPUs; its own gpu is not read
        if cpu:
            _check_cpu_specs(ctx, e, engine)
        elif specs is None:
            without_spec.append(e.section or e.name)
        else:
            _check_gpu_specs(e, engine)
    if without_spec:
        keys = ", ".join(f"{s}.scheduling_spec" for s in without_spec)
        ctx.warn(
            f"no {keys}: AReaL's default scheduling_spec asks for gpu 0, so its scheduler "
            "would start these workers without a GPU; the plan counts the GPUs of their "
            "backend strings; add one entry with gpu 1, e.g. "
            f"+{without_spec[0]}.scheduling_spec=[{{gpu:1}}]"
        )


def _check_gpu_specs(e: EnginePlan, engine: EngineSection) -> None:
    """G1 and G2: what each worker of an engine on its own GPUs asks for."""
    assert e.allocation is not None and engine.specs is not None
    key = engine.key("scheduling_spec")
    for i, spec in enumerate(engine.specs):
        gpu = spec.gpu
        at = f"{key}.{i}.gpu"
        if e.allocation.is_inference:
            if gpu == 0:
                raise AllocationError(
                    f"{key}: gpu 0 starts {e.name}'s servers without a GPU (AReaL gives each "
                    f"server t×p = {e.allocation.instance_size} GPUs only when gpu is above 0)",
                    None,
                    None,
                    hint=f"{at}=1",
                )
            continue
        if gpu != 1:
            what = (
                "its workers get no GPU"
                if gpu == 0
                else f"each rank gets {gpu} GPUs and uses one of them"
            )
            raise AllocationError(
                f"{key}: gpu {gpu}: {what} (a training engine runs one rank per GPU, and AReaL "
                "passes gpu to its scheduler as it is)",
                None,
                None,
                hint=f"{at}=1",
            )


def _check_cpu_specs(ctx: Context, e: EnginePlan, engine: EngineSection) -> None:
    """G3: on a CPU run every engine on its own asks for no GPU."""
    for i, spec in enumerate(engine.specs or ()):
        if spec.gpu == 0:
            continue
        consequence = {
            "local": "AReaL's local scheduler would give its workers the machine's real GPUs",
            "slurm": "AReaL's Slurm scheduler divides by n_gpus_per_node = 0",
            "ray": "AReaL's Ray scheduler divides by n_gpus_per_node = 0",
        }.get(ctx.column, "AReaL's schedulers would give it GPUs the run does not have")
        v2_servers = e.controller == "v2" and e.allocation is not None and e.allocation.is_inference
        if v2_servers and ctx.column != "local":  # local counts the machine's GPUs, never 0
            consequence = "controller v2 refuses n_gpus_per_node = 0"
        key = engine.key("scheduling_spec")
        raise AllocationError(
            f"{key}: gpu {spec.gpu} on a CPU run (cluster.n_gpus_per_node is 0): {consequence}",
            None,
            None,
            hint=f"{key}.{i}.gpu=0",
        )


def colocate_2_0(ctx: Context) -> None:
    """C1-C4, C6 and §5's colocation rules, for the scheduler in use."""
    colocate(ctx, lambda e, target, owners: _check_pair(ctx, e, target, owners))


def _check_pair(ctx: Context, e: EnginePlan, target: EnginePlan, owners: Mapping[str, str]) -> None:
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    key = strategy_key(e).rpartition(".")[0]
    chain = f"{e.name} -> {target.name}"
    if target.controller == "v2":
        registered = f"{target.name}-inf" if t.is_inference else f"{target.name}-guard"
        raise AllocationError(
            f"{key}: {chain}: {target.name} runs controller v2 "
            f"({target.section or target.name}._version v2), whose workers AReaL registers as "
            f"{registered}: no {target.name} workers exist to colocate with "
            f"(WorkerNotFoundError when {e.name} is created)",
            None,
            None,
            hint=f"{strategy_key(e, 'type')}=separation, or controller v1 for "
            + " ".join(f"{key}=v1" for key in _v1_keys(ctx, e, target)),
        )
    engine = _section(ctx, e)
    if (
        e.name == "rollout"
        and not e.fork
        and e.controller == "v1"
        and engine.agent_mode != "online"
    ):
        raise AllocationError(
            f"{key}: {chain} with fork false: the rollout then reuses {target.name}'s "
            "processes and registers no rollout workers, and AReaL's eval-rollout, which "
            "colocates with the rollout, fails (WorkerNotFoundError)",
            None,
            None,
            hint=f"{strategy_key(e, 'fork')}=true",
        )
    if e.replicas == target.replicas:
        if e.per_worker != target.per_worker:
            raise replica_mismatch(
                e,
                target,
                owners,
                f"with as many workers as {target.name}, each {e.name} worker needs "
                f"{_gpus(e.per_worker)} but is forked onto one {target.name} worker's "
                f"{target.per_worker}",
            )
    else:
        _different_replicas(ctx, e, target, owners, engine)
    if e.controller == "v2" and target.controller == "v1":
        ctx.warn(
            f"{chain}: {e.name} runs controller v2 colocated with {target.name} on v1: AReaL "
            "forks it onto the v1 workers (its guard API is served there), a combination its "
            "tests do not cover"
        )


def _v1_keys(ctx: Context, e: EnginePlan, target: EnginePlan) -> list[str]:
    """The ``_version`` keys to set to v1 so that ``e`` can colocate onto ``target``: the
    target's, the engine's when it is v2, and the actor's or rollout's partner (the two
    run one controller version)."""
    names = [target.name] + ([e.name] if e.controller == "v2" else [])
    partner = {"actor": "rollout", "rollout": "actor"}.get(target.name)
    if partner is not None and partner in ctx.engines and ctx.engines[partner].controller == "v2":
        names.append(partner)
    keys = []
    for name in dict.fromkeys(names):
        plan = ctx.engines[name]
        keys.append(f"{plan.section or plan.name}._version")
    return keys


def _different_replicas(
    ctx: Context,
    e: EnginePlan,
    target: EnginePlan,
    owners: Mapping[str, str],
    engine: EngineSection,
) -> None:
    """§5: only Slurm and Ray colocate an engine with another number of workers, and only
    an inference engine whose servers cover the target's GPUs in groups within a node."""
    a, t = e.allocation, target.allocation
    assert a is not None and t is not None
    column, n = ctx.column, ctx.n
    if column == "local":
        raise replica_mismatch(
            e,
            target,
            owners,
            "AReaL's local scheduler colocates only equal replica counts (Replica count mismatch)",
        )
    if column == "null":
        raise replica_mismatch(
            e,
            target,
            owners,
            "only the slurm and ray schedulers colocate different replica counts: set "
            "scheduler.type, or give both engines the same count",
        )
    if not a.is_inference:
        raise replica_mismatch(
            e,
            target,
            owners,
            f"AReaL's {SCHEDULER_NAME[column]} scheduler colocates different replica counts "
            "only for an inference engine",
        )
    gpus_given = engine.specs is None or all(s.gpu != 0 for s in engine.specs)
    problems = []
    if not gpus_given:
        problems.append("its scheduling_spec gpu is 0, so its servers ask for no GPUs")
    if a.world_size != t.world_size:
        problems.append(
            f"its {a.world_size} GPUs (d×t×p) must be exactly {target.name}'s {t.world_size}"
        )
    if n and n % a.instance_size:
        problems.append(
            f"an instance's {a.instance_size} GPUs (t×p) must divide a node's {n}, as the "
            "servers are placed in groups within each of the target's nodes"
        )
    if problems:
        raise replica_mismatch(e, target, owners, "; ".join(problems))


# ----------------------------------------------------------------------- AWEX (§6)


def check_awex_sharing(ctx: Context) -> None:
    """A2-A5: v1 AWEX's rollout runs on exactly the actor's GPUs, and the plan shows it."""
    if not v1_awex(ctx) or "rollout" not in ctx.engines or "actor" not in ctx.engines:
        return
    actor, rollout = ctx.engines["actor"], ctx.engines["rollout"]
    if actor.allocation is None or rollout.allocation is None:
        return
    a, r = actor.allocation, rollout.allocation
    if r.world_size != a.world_size:
        instances = a.world_size // r.instance_size if a.world_size % r.instance_size == 0 else 0
        fix = (
            f"rollout.backend={r.backend}:d{instances}"
            + (f"t{r.parallel.tp_size}" if r.parallel.tp_size > 1 else "")
            + (f"p{r.parallel.pp_size}" if r.parallel.pp_size > 1 else "")
            if instances
            else f"rollout.backend={r.backend}:d{a.world_size}"
        )
        raise AllocationError(
            f"rollout.backend: AWEX (actor.weight_update_mode awex, controller v1) sends the "
            f"weights by CUDA IPC to the rollout on the same GPUs, so the rollout must run on "
            f"exactly the actor's {a.world_size} GPUs; {r} takes {r.world_size}",
            str(r),
            None,
            hint=fix,
        )
    if rollout.colocated_with is not None:
        return  # the scheduler's colocation rules placed it (colocate_2_0)
    if ctx.column in ("slurm", "ray"):
        raise AllocationError(
            f"rollout.scheduling_strategy: AWEX needs the rollout on the actor's GPUs, but "
            f"AReaL's {SCHEDULER_NAME[ctx.column]} scheduler gives a separated rollout GPUs of "
            "its own, where "
            "CUDA IPC cannot reach the actor",
            None,
            None,
            hint="rollout.scheduling_strategy.type=colocation "
            "rollout.scheduling_strategy.target=actor",
        )
    n = ctx.n
    between = [
        e.name
        for e in ctx.separated()
        if e.name not in ("actor", "rollout") and _created_before(ctx, e.name, "rollout")
    ]
    if a.world_size != n or between:
        why = (
            f"the actor takes {a.world_size} of the machine's {n} GPUs"
            if a.world_size != n
            else f"{', '.join(between)} {'takes' if len(between) == 1 else 'take'} GPUs of "
            "their own in between"
        )
        raise AllocationError(
            "rollout.scheduling_strategy: AWEX needs the rollout on the actor's GPUs; a "
            "separated rollout gets them from AReaL's local scheduler only by wrapping around "
            f"the machine right after the actor, which needs the actor to take all {n} GPUs "
            f"and nothing separated between them, but {why}",
            None,
            None,
            hint=f"actor.backend={a.backend}:d{n} rollout.backend={_awex_rollout(r, n)} (the "
            "whole machine for both)"
            if a.world_size != n
            else f"colocate {', '.join(between)} with the actor "
            f"({between[0]}.scheduling_strategy.type=colocation "
            f"{between[0]}.scheduling_strategy.target=actor)",
        )
    ctx.engines["rollout"] = replace(
        rollout, colocated_with="actor", gpu_owner="actor", awex_shared=True
    )


def _awex_rollout(r: ModelAllocation, gpus: int) -> str:
    """The rollout's layout on ``gpus`` GPUs, its instances as they are when they fit."""
    size = r.instance_size if gpus % r.instance_size == 0 else 1
    p = r.parallel
    body = f"d{gpus // size}" + (
        (f"p{p.pp_size}" if p.pp_size > 1 else "") + (f"t{p.tp_size}" if p.tp_size > 1 else "")
        if size > 1
        else ""
    )
    return f"{r.backend}:{body}"


def _scaled(alloc: ModelAllocation, gpus: int) -> str | None:
    """``alloc`` with its data-parallel size changed to take ``gpus`` GPUs (its other sizes
    kept), or None when they do not divide ``gpus``."""
    from areal_conf.parser import parse_backend

    p = alloc.parallel
    rest = alloc.world_size // p.dp_size
    if gpus % rest or alloc.parallel.etp_size > 1:
        return None
    sizes = {"d": gpus // rest, "p": p.pp_size, "t": p.tp_size, "c": p.cp_size, "e": p.ep_size}
    body = "".join(f"{letter}{size}" for letter, size in sizes.items() if size > 1 or letter == "d")
    try:
        return str(parse_backend(f"{alloc.backend}:{body}"))
    except AllocationError:
        return None


def _created_before(ctx: Context, name: str, other: str) -> bool:
    from areal_conf.engines import creation_order

    order = creation_order(ctx.run, ctx.engines)
    return order.index(name) < order.index(other)


# --------------------------------------------------------- the scheduler's GPUs (§5)


def check_scheduler_gpus(ctx: Context) -> None:
    """§5: each engine on its own GPUs as the scheduler allocates them, and the total
    against what the scheduler has (W2, W8)."""
    if ctx.run.cluster.cpu_run:
        return
    n, column = ctx.n, ctx.column
    separated = ctx.separated()
    for e in separated:
        _check_engine_on_scheduler(ctx, e)
    needed = sum(e.gpus for e in separated)
    if column == "local":
        if needed > n:
            gpus = ctx.gpus_per_node
            parts = " + ".join(f"{e.name} {e.gpus}" for e in separated)
            raise AllocationError(
                f"{gpus.key}: the engines need {needed} GPUs ({parts}) but AReaL's local "
                f"scheduler has {_gpus(n)} ({gpus.source}): it would hand GPUs out round "
                "robin and put several engines on the same GPUs without saying so",
                None,
                None,
                hint="shrink an engine's layout, colocate engines, "
                + (
                    f"list more GPUs in {CUDA_ENV} (indices, e.g. 0,1,2,3), "
                    if gpus.key == CUDA_ENV
                    else ""
                )
                + "or use scheduler.type=slurm or ray for several nodes",
            )
    elif column in ("slurm", "ray"):
        declared = ctx.run.cluster.n_nodes * n
        if needed > declared:
            nodes = -(-needed // n)
            ctx.warn(
                f"the engines need {needed} GPUs ({nodes} nodes of {n}) but cluster.n_nodes "
                f"× n_gpus_per_node declares {declared}: AReaL's {SCHEDULER_NAME[column]} "
                "scheduler does not "
                f"read cluster.n_nodes and asks for them anyway, so the cluster must have them "
                f"(cluster.n_nodes={nodes} says so)"
            )


def _check_engine_on_scheduler(ctx: Context, e: EnginePlan) -> None:
    alloc = e.allocation
    assert alloc is not None
    n, column = ctx.n, ctx.column
    key = f"{e.section or e.name}.backend"
    per_worker = e.per_worker
    if column == "local" and per_worker > n:
        raise AllocationError(
            f"{key}: a worker of {alloc} needs {per_worker} GPUs but AReaL's local scheduler "
            f"has one machine of {n} ({ctx.gpus_per_node.source})",
            str(alloc),
            None,
            hint=f"make t×p at most {n}, or use scheduler.type=slurm or ray for instances "
            "spanning nodes",
        )
    if column == "slurm":
        if alloc.world_size % n:
            fit = (alloc.world_size // n + 1) * n
            layout = _scaled(alloc, fit)
            example = f"{key}={layout}" if layout else f"a layout on {fit} GPUs"
            raise AllocationError(
                f"{key}: AReaL's Slurm scheduler allocates only entire nodes: {alloc} takes "
                f"{alloc.world_size} GPUs but a node has {n}",
                str(alloc),
                None,
                hint=f"{example} (a multiple of {n} GPUs), or colocate {e.name} with an "
                "engine on whole nodes",
            )
        if alloc.is_inference and e.controller == "v1" and alloc.instance_size > n:
            raise AllocationError(
                f"{key}: an instance of {alloc.instance_size} GPUs (t×p) is larger than a node "
                f"({n}): AReaL's Slurm scheduler starts v1 servers as tasks within one node "
                "(sbatch fails with --ntasks-per-node=0)",
                str(alloc),
                None,
                hint=f"make t×p at most {n}, or {e.section or e.name}._version=v2 (and the "
                "same for the actor), whose servers span nodes",
            )
        if n % per_worker:
            raise AllocationError(
                f"{key}: a worker of {alloc} takes {per_worker} GPUs, which does not divide a "
                f"node's {n}: AReaL's Slurm scheduler packs workers {n} GPUs to a node",
                str(alloc),
                None,
                hint=f"make t×p a divisor of {n}",
            )
    if column == "ray":
        if per_worker > n and per_worker % n:
            raise AllocationError(
                f"{key}: a worker of {alloc} takes {per_worker} GPUs, more than a node's {n} "
                "but not a whole number of nodes, which AReaL's Ray scheduler requires",
                str(alloc),
                None,
                hint=f"make t×p a divisor or a multiple of {n}",
            )
        if alloc.world_size >= n and alloc.world_size % n:
            ctx.warn(
                f"{e.name}: {alloc} takes {alloc.world_size} GPUs, not a multiple of a node's "
                f"{n}: AReaL's Ray scheduler puts the rest on a partial node (Slurm would "
                "refuse it)"
            )


def check_ray_specs(ctx: Context) -> None:
    """Ray refuses ``additional_bash_cmds`` in a scheduling_spec."""
    if ctx.column != "ray":
        return
    for e in ctx.built():
        engine = _section(ctx, e)
        for i, spec in enumerate(engine.specs or ()):
            if spec.bash_cmds:
                key = engine.key("scheduling_spec")
                raise AllocationError(
                    f"{key}: entry {i} has additional_bash_cmds, which AReaL's Ray scheduler "
                    "does not support",
                    None,
                    None,
                    hint=f"{key}.{i}.additional_bash_cmds=null (set the environment up in the "
                    "Ray image instead), or scheduler.type=slurm",
                )

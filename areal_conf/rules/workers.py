"""Each engine's workers and the GPUs its ``scheduling_spec`` gives each, as AReaL's
controllers count them (v1 and v2, training and inference), and the engines that would
get no GPU or GPUs the run does not have."""

from __future__ import annotations

from dataclasses import replace

from areal_conf.config.run_config import EngineSection
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import fix, sentence
from areal_conf.plan.plan import EnginePlan
from areal_conf.rules.common import engine_section
from areal_conf.rules.context import Context
from areal_conf.rules.engines import (
    replica_text,
)


def count_workers(ctx: Context) -> None:
    """§3: AReaL's workers and GPUs per worker for every engine; E5's rule for two
    scheduling_spec entries; G0-G3 for the engines on GPUs of their own."""
    n = ctx.n
    cpu = ctx.run.cluster.cpu_run
    without_spec: list[str] = []
    for e in ctx.built():
        engine = engine_section(ctx, e)
        alloc = e.allocation
        assert alloc is not None
        specs = engine.specs
        key = engine.key("scheduling_spec")
        if specs is not None and len(specs) == 2 and not alloc.is_inference:
            if e.controller == "v2":
                raise ConfigError(
                    f"{key}: 2 entries, but controller v2 takes exactly one",
                    hint=f"keep one entry (the first asks for gpu {specs[0].gpu})",
                )
            if alloc.world_size != 2:
                raise ConfigError(
                    f"{key}: 2 entries, one per worker, but {e.name} runs "
                    f"{replica_text(alloc)} ({alloc}): AReaL's schedulers take one entry for "
                    "all workers, or one per worker",
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
            sentence(
                f"no {keys}: AReaL's default scheduling_spec asks for gpu 0, so its scheduler "
                "would start these workers without a GPU; the plan counts the GPUs of their "
                "backend strings; add one entry with gpu 1, e.g. ",
                fix(f"+{without_spec[0]}.scheduling_spec=[{{gpu:1}}]"),
            )
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
                    hint=fix(f"{at}=1"),
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
                hint=fix(f"{at}=1"),
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
        raise ConfigError(
            f"{key}: gpu {spec.gpu} on a CPU run (cluster.n_gpus_per_node is 0): {consequence}",
            hint=fix(f"{key}.{i}.gpu=0"),
        )

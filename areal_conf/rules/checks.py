"""The checks of a validation, and the state they hand on to each other.

:func:`areal_conf.validation.validate` reads the config once
(:func:`areal_conf.config.reading.read_config`) and then runs the rules of its AReaL version
(:data:`areal_conf.rules.registry.RULES`), in that order: the first one that fails is the
message. Each rule's function takes a :class:`Context`, which holds the config as read
and what earlier checks found (the engines as parsed, where they run, the warnings).

This module holds the checks every version runs: parsing the engines' backend strings,
colocation chains, the cluster's capacity, placement on nodes, the model's shape and the
memory estimate. AReaL 2.0's own rules are in :mod:`areal_conf.rules`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from areal_conf.areal.local_gpus import GpuCount, gpus_per_node
from areal_conf.areal.roles import ROLE_NAMES
from areal_conf.areal.versions import RulesChoice
from areal_conf.config.run_config import RunConfig
from areal_conf.config.run_reading import Reading
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.model.shape import ModelShape, ShapeSource, model_shape, read_source
from areal_conf.plan.placement import place, placement_warnings
from areal_conf.plan.plan import EnginePlan, Plan, SchedulerRules, Slot
from areal_conf.rules.engines import (
    ReplicaRule,
    check_kind_of,
    creation_order,
    parse_engines,
    resolve_colocation,
)
from areal_conf.rules.fit import MemoryCheck, Recheck, check_memory
from areal_conf.settings import Settings, gpu_memory_of


@dataclass
class Context:
    """What the checks of one validation share: the config as read (never changed) and
    what the checks so far found."""

    reading: Reading
    engines: dict[str, EnginePlan] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: The scheduler's column of rules: local, slurm, ray, null, or any (the version's
    #: rules do not depend on the scheduler).
    column: str = "any"
    #: The nodes the plan has: ``cluster.n_nodes``, or 1 for the local scheduler (one
    #: machine).
    plan_nodes: int = 0
    placed_nodes: int | None = None
    slots: dict[str, tuple[Slot, ...]] = field(default_factory=dict)
    memory: MemoryCheck | None = None
    memory_note: str = ""
    model: dict[str, Any] = field(default_factory=dict)  # the shape's keys, merged
    model_source: str = ""
    step_seconds: dict[str, float] = field(default_factory=dict)  # predicted, by engine
    speed_note: str = ""  # how the step times were predicted
    #: The whole check again, on the config with a fix's overrides: a fix is printed
    #: only when it passes (None: fixes are not checked).
    recheck: Recheck | None = None
    #: The engines whose GPUs a recheck further out is fixing (their groups get no fix
    #: of their own in this check).
    fixing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.plan_nodes:
            self.plan_nodes = self.run.cluster.n_nodes

    @property
    def run(self) -> RunConfig:
        return self.reading.run

    @property
    def choice(self) -> RulesChoice:
        return self.reading.choice

    @property
    def settings(self) -> Settings:
        return self.reading.settings

    @property
    def gpus_per_node(self) -> GpuCount:
        """GPUs per node as the scheduler in use counts them, and where from: the
        machine's on the local scheduler, ``cluster.n_gpus_per_node`` on the others."""
        declared = self.run.cluster.n_gpus_per_node
        return gpus_per_node(declared, self.column, self.settings.machine_gpus)

    @property
    def n(self) -> int:
        """GPUs per node."""
        return self.gpus_per_node.count

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def built(self) -> list[EnginePlan]:
        """The built engines in AReaL's creation order."""
        return [
            self.engines[n]
            for n in creation_order(self.run, self.engines)
            if self.engines[n].enabled
        ]

    def separated(self) -> list[EnginePlan]:
        """The built engines on GPUs of their own, in creation order."""
        return [e for e in self.built() if not e.colocated_with]

    def placement_order(self) -> list[EnginePlan]:
        """Separated engines in the order they take GPUs: the plan's order."""
        return [e for e in self.engines.values() if e.enabled and not e.colocated_with]

    def plan(self) -> Plan:
        memory = self.memory.estimates if self.memory is not None else {}
        engines = {
            name: replace(
                e,
                slots=self.slots.get(e.owner, ()),
                memory=memory.get(name),
                step_seconds=self.step_seconds.get(name),
            )
            if e.enabled
            else e
            for name, e in self.engines.items()
        }
        warnings = [pasteable(w, self.run) for w in self.warnings]
        if self.choice.warning:
            warnings.insert(0, self.choice.warning)
        return Plan(
            engines,
            self.plan_nodes,
            self.n,
            tuple(warnings),
            gpus_from=self.gpus_per_node,
            memory_note=self.memory_note,
            rules=self.choice,
            scheduler=SchedulerRules(self.run.scheduler_type, self.column),
            model_source=self.model_source,
            placed_nodes=self.placed_nodes,
            speed_note=self.speed_note,
        )


#: ``key=value`` in a message's fix, not already ``+``/``++``/``~`` and not inside a
#: longer word.
_OVERRIDE: Final = re.compile(r"(?<![\w.+~])([A-Za-z_]\w*(?:\.\w+)*)=(?=[^\s=])")
#: The top-level keys of AReaL's configs that a fix may set.
_AREAL_SECTIONS: Final = frozenset(
    {*ROLE_NAMES, "scheduler", "cluster", "enable_offload", "sglang", "vllm", "gconfig"}
)


def pasteable(text: str, run: RunConfig) -> str:
    """``text`` with each ``key=value`` of a fix spelled as Hydra takes it on this config:
    ``++key=value`` where the config has no such key (Hydra refuses to set a key the
    config lacks without it; ``++`` adds or sets), as it is where the key exists."""

    def spell(match: re.Match[str]) -> str:
        key = match[1]
        top = key.split(".")[0]
        if key in run.present_keys or (top not in _AREAL_SECTIONS and top not in run.engines):
            return match[0]
        return "++" + match[0]

    return _OVERRIDE.sub(spell, text)


# ----------------------------------------------------------------------- the stages


def parse_all(ctx: Context, *, check_kinds: bool) -> None:
    ctx.engines = parse_engines(ctx.run, check_kinds=check_kinds)


def check_kinds(ctx: Context) -> None:
    for e in ctx.built():
        check_kind_of(e, ctx.run.engines[e.name])


def colocate(ctx: Context, replica_rule: ReplicaRule | None = None) -> None:
    ctx.engines = resolve_colocation(ctx.run, ctx.engines, replica_rule)


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
        hint=f"write the teacher as AReaL 1.0 does: teacher.backend={layout} with the engine's "
        "keys (path, scheduling_spec, ...) directly under teacher; or, if your AReaL is 2.0, "
        "apply its rules: AREAL_CONF_AREAL_VERSION=2.0",
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


def capacity_everywhere(ctx: Context) -> None:
    """Separated engines fit the declared cluster, ``n_nodes × n_gpus_per_node`` (AReaL
    1.0's rule, and the rule every scheduler shares)."""
    if ctx.run.cluster.cpu_run:
        return
    separated = ctx.separated()
    needed = sum(e.gpus for e in separated)
    n_nodes, per_node = ctx.run.cluster.n_nodes, ctx.n
    available = n_nodes * per_node
    if needed <= available:
        return
    parts = " + ".join(f"{e.name} {e.gpus}" for e in ctx.placement_order())
    nodes_needed = -(-needed // per_node)
    raise ConfigError(
        f"cluster: the engines need {needed} GPUs ({parts}) but the cluster has {available} "
        f"({n_nodes} node{'s' if n_nodes != 1 else ''} × {per_node} GPUs)",
        hint=f"add nodes (cluster.n_nodes={nodes_needed}) or shrink an engine's layout",
    )


def place_engines(ctx: Context) -> None:
    """Concrete GPUs for every separated engine, as the scheduler hands them out."""
    if ctx.run.cluster.cpu_run:
        return
    from areal_conf.plan.placement import place_whole_nodes

    order = [(e.name, e.allocation) for e in ctx.placement_order() if e.allocation is not None]
    per_node = ctx.n
    needed = sum(a.world_size for _, a in order)
    if ctx.column == "local":
        ctx.plan_nodes = 1
        ctx.slots = place(order, 1, per_node)
    elif ctx.column == "slurm":
        ctx.slots, used_nodes = place_whole_nodes(order, per_node)
        ctx.placed_nodes = used_nodes
    else:
        nodes = ctx.plan_nodes
        if ctx.column == "ray":
            nodes = max(nodes, -(-needed // per_node))
            ctx.placed_nodes = nodes
        ctx.slots = place(order, nodes, per_node)
    for text in placement_warnings(order, per_node):
        ctx.warn(text)


# ------------------------------------------------------------------------ the model


def _shape_hint(ctx: Context) -> str:
    from areal_conf.model.shape import SHAPE_HINT

    if ctx.run.own_config:
        return (
            "set model.hf_config to the model's config.json, its directory or its Hugging "
            "Face id (or AREAL_CONF_MODEL)"
        )
    return SHAPE_HINT


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
        own = _own_model(ctx, e)
        if own is not None:
            continue  # checked against its own model below, when that is known
        assert e.allocation is not None
        check_model(e.name, e.allocation, ctx.model)


def _own_model(ctx: Context, e: EnginePlan) -> str | None:
    """The model an engine runs when it is not the actor's (a teacher's ``path``)."""
    run = ctx.run
    actor_path = run.actor.path if run.actor is not None else None
    path: object = None
    if e.name == "teacher":
        teacher_path = run.teacher.path if run.teacher is not None else None
        path = teacher_path or run.engines["teacher"].path
    elif e.name not in ("rollout", "actor"):
        path = run.engines[e.name].path
    if isinstance(path, str) and path and path != actor_path:
        return path
    return None


def check_engine_memory(ctx: Context) -> None:
    """Every engine's memory per GPU against a GPU's memory."""
    if ctx.run.cluster.cpu_run:
        return
    shape = model_shape(ctx.model, _shape_hint(ctx))
    if isinstance(shape, str):
        ctx.memory_note = "memory not checked: " + (
            f"model shape unknown: {ctx.memory_note}; {_shape_hint(ctx)}"
            if ctx.memory_note and not ctx.model
            else shape
        )
        ctx.memory = MemoryCheck({n: None for n, e in ctx.engines.items() if e.enabled})
        return
    gpu_gb, memory_from, assumed = gpu_memory(ctx)
    own: dict[str, ModelShape] = {}
    notes: list[str] = []
    for e in ctx.built():
        path = _own_model(ctx, e)
        if path is None:
            continue
        found: ShapeSource = read_source(path, f"{e.section or e.name}.path")
        other = model_shape(found.keys) if found.keys else found.missing
        if isinstance(other, str):
            notes.append(f"{e.name}: its model {path!r} is unknown, so the actor's shape is used")
            continue
        own[e.name] = other
    ctx.memory = check_memory(
        ctx.run,
        ctx.engines,
        shape,
        gpu_gb,
        ctx.plan_nodes,
        ctx.n,
        memory_from,
        own,
        assumed=assumed,
        recheck=ctx.recheck,
        fixing=ctx.fixing,
    )
    problem = ctx.memory.problem
    if problem is not None and ctx.memory.fatal:
        raise problem
    if problem is not None:
        # The GPU's memory is an assumption and a GPU areal-conf knows would hold the
        # engines: say what would not fit, reject nothing.
        ctx.warn(
            f"{problem.reason}; if your GPUs have more memory, give it "
            f"(AREAL_CONF_GPU_MEMORY_GB=<GB>); otherwise {problem.hint}"
        )
    for text in (*notes, *ctx.memory.warnings):
        ctx.warn(text)


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
        if _own_model(ctx, e) is not None:
            continue  # another model (a teacher's): its shape is not the actor's
        step = training_step(ctx.run, section, ctx.settings.mean_response_tokens)
        if isinstance(step, str):
            continue
        try:
            ctx.step_seconds[e.name] = step.seconds(e.allocation, shape, gpu, max(1, ctx.n))
        except AllocationError:  # e.g. more data-parallel ranks than tokens: no time
            continue
        timed[e.name] = step
    if timed:
        ctx.speed_note = describe_steps(timed, said)


def gpu_memory(ctx: Context) -> tuple[float, str, bool]:
    """A GPU's memory in GB for this config: see :func:`areal_conf.settings.gpu_memory_of`."""
    return gpu_memory_of(ctx.settings, ctx.run.cluster.gpu_memory_gb)

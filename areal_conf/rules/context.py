"""What the rules of one validation share: :class:`Context`, and how a fix is spelled.

:func:`areal_conf.validation.validate` reads the config once
(:func:`areal_conf.config.reading.read_config`) and then runs the rules of its AReaL version
(:data:`areal_conf.rules.registry.RULES`), in that order: the first one that fails is the
message. Each rule's function takes a :class:`Context`, which holds the config as read
and what earlier checks found (the engines as parsed, where they run, the warnings).

The rules themselves are in :mod:`areal_conf.rules`' topic modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from areal_conf.areal.local_gpus import GpuCount, gpus_per_node
from areal_conf.areal.roles import ROLE_NAMES
from areal_conf.areal.versions import RulesChoice
from areal_conf.config.run_config import RunConfig
from areal_conf.config.run_reading import Reading
from areal_conf.errors import AllocationError
from areal_conf.hints import Hint, Sentence, as_hint
from areal_conf.plan.plan import EnginePlan, Plan, SchedulerRules, Slot
from areal_conf.rules.engines import (
    creation_order,
)
from areal_conf.rules.fit import MemoryCheck, Recheck
from areal_conf.settings import Settings, gpu_memory_of

if TYPE_CHECKING:
    from areal_conf.model.shape import ModelShape
    from areal_conf.perf.rl_step import RLInputs


@dataclass
class Context:
    """What the checks of one validation share: the config as read (never changed) and
    what the checks so far found."""

    reading: Reading
    engines: dict[str, EnginePlan] = field(default_factory=dict)
    warnings: list[str | Hint] = field(default_factory=list)
    #: The id of the rule running now, and of the rule that gave each warning.
    rule: str | None = None
    warned_by: dict[str, str | None] = field(default_factory=dict)
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
    #: The shapes of engines that run another model than the actor's (a teacher's), and
    #: the models of those whose shape is not known.
    own_shapes: dict[str, ModelShape] = field(default_factory=dict)
    own_unknown: dict[str, str] = field(default_factory=dict)
    step_seconds: dict[str, float] = field(default_factory=dict)  # predicted, by engine
    speed_note: str = ""  # how the step times were predicted
    rl_inputs: RLInputs | None = None  # what predicting the RL step needs
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

    def warn(self, text: str | Hint | Sentence) -> None:
        """Warn with ``text`` (a :class:`Sentence` or :class:`Hint` where it quotes
        overrides, which the plan spells for the config)."""
        said = text if isinstance(text, str) else as_hint(text)
        if str(said) not in self.warned_by:
            self.warnings.append(said)
            self.warned_by[str(said)] = self.rule

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
                offloaded=self.run.leaves_gpus(name),
                own_shape=self.own_shapes.get(name),
            )
            if e.enabled
            else e
            for name, e in self.engines.items()
        }
        warnings = [
            w if isinstance(w, str) else pasteable(w, self.run).text() for w in self.warnings
        ]
        rules = [self.warned_by.get(str(w)) for w in self.warnings]
        if self.choice.warning:  # which AReaL version's rules apply: no rule's
            warnings.insert(0, self.choice.warning)
            rules.insert(0, None)
        return Plan(
            engines,
            self.plan_nodes,
            self.n,
            tuple(warnings),
            warning_rules=tuple(rules),
            gpus_from=self.gpus_per_node,
            memory_note=self.memory_note,
            rules=self.choice,
            scheduler=SchedulerRules(self.run.scheduler_type, self.column),
            model_source=self.model_source,
            placed_nodes=self.placed_nodes,
            speed_note=self.speed_note,
            rl_inputs=self.rl_inputs,
        )


#: The top-level keys of AReaL's configs that a fix may set.
_AREAL_SECTIONS: Final = frozenset(
    {*ROLE_NAMES, "scheduler", "cluster", "enable_offload", "sglang", "vllm", "gconfig"}
)


def pasteable(hint: Hint, run: RunConfig) -> Hint:
    """``hint`` with each override spelled as Hydra takes it on this config:
    ``++key=value`` where the config has no such key (Hydra refuses to set a key the
    config lacks without it; ``++`` adds or sets), as it is where the key exists."""

    def spell(override: str) -> str:
        key, equals, _ = override.partition("=")
        top = key.split(".")[0]
        if (
            not equals
            or key.startswith(("+", "~"))
            or key in run.present_keys
            or (top not in _AREAL_SECTIONS and top not in run.engines)
        ):
            return override
        return "++" + override

    return hint.spelled(spell)


def pasteable_error(error: AllocationError, run: RunConfig) -> AllocationError:
    """``error`` with the overrides of its hint spelled for ``run`` (:func:`pasteable`)."""
    if error.advice is None:
        return error
    return error.with_hint(pasteable(error.advice, run))


def gpu_memory(ctx: Context) -> tuple[float, str, bool]:
    """A GPU's memory in GB for this config: see :func:`areal_conf.settings.gpu_memory_of`."""
    return gpu_memory_of(ctx.settings, ctx.run.cluster.gpu_memory_gb)

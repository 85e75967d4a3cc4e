"""The allocation plan: GPUs per engine, colocation, and concrete GPU slots."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from areal_conf.areal.local_gpus import DECLARED, GpuCount
from areal_conf.areal.versions import RulesChoice
from areal_conf.perf.memory import MemoryEstimate
from areal_conf.spec.allocation import ModelAllocation

if TYPE_CHECKING:  # the RL step's model is imported when a step is predicted
    from areal_conf.model.shape import ModelShape
    from areal_conf.perf.rl_step import RLEngine, RLInputs, RLStep

Slot = tuple[int, int]  # (node, local GPU index)


@dataclass(frozen=True)
class EnginePlan:
    """One engine's part of the plan; ``allocation`` is None when it is not built."""

    name: str
    allocation: ModelAllocation | None
    written: str  # the backend text as configured ("" when empty)
    inherited_from: str | None = None  # critic/ref with an empty backend use actor's
    colocated_with: str | None = None  # the scheduling target of a colocated engine
    slots: tuple[Slot, ...] = ()
    kind: str = ""  # "inference" or "training"
    fork: bool = True  # colocated: new processes on the target's GPUs (AReaL's default)
    gpu_owner: str | None = None  # colocated: the engine at the end of the chain
    not_built: str | None = None  # why the engine is not built (allocation is None)
    memory: MemoryEstimate | None = None  # per GPU; None when the model shape is unknown
    # Predicted seconds of a training step (areal_conf.perf.speed); None: not predicted.
    step_seconds: float | None = None
    section: str = ""  # where its keys are, when not its name (teacher.rollout)
    controller: str = "v1"  # AReaL's controller version (_version)
    # AReaL's workers and GPUs per worker (controller v2 splits an inference instance
    # larger than a node into one worker per node); None: the backend string's
    # replicas, and the GPUs of one replica.
    workers: int | None = None
    gpus_per_worker: int | None = None
    # The rollout shares the actor's GPUs through AWEX although both are separated: AReaL's
    # local scheduler numbers the rollout's GPUs after the actor's, modulo the machine.
    awex_shared: bool = False
    # It leaves its GPUs between the phases of a step (AReaL's offload, or v1 AWEX's
    # switch), so it shares them with the engines it is colocated with in turn.
    offloaded: bool = False
    # The model it runs when that is not the actor's (a teacher's), when known.
    own_shape: ModelShape | None = None

    @property
    def enabled(self) -> bool:
        """Built: it runs and (on GPUs) takes GPUs."""
        return self.allocation is not None

    @property
    def owner(self) -> str:
        """The engine whose GPUs this one runs on (itself when separated)."""
        return self.gpu_owner or self.colocated_with or self.name

    @property
    def gpus(self) -> int:
        return 0 if self.allocation is None else self.allocation.world_size

    @property
    def replicas(self) -> int:
        """The workers AReaL's scheduler starts: server instances (inference) or ranks
        (training), or what controller v2 makes of them."""
        if self.allocation is None:
            return 0
        return self.allocation.replicas if self.workers is None else self.workers

    @property
    def per_worker(self) -> int:
        """GPUs of one worker."""
        if self.allocation is None:
            return 0
        if self.gpus_per_worker is not None:
            return self.gpus_per_worker
        return self.allocation.world_size // self.allocation.replicas

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted({node for node, _ in self.slots}))

    def to_dict(self, cpu_run: bool = False) -> dict[str, Any]:
        """The engine in ``allocation_plan.json``; on a CPU run it takes no GPUs."""
        section = self.section or self.name
        if self.allocation is None:
            return {
                "enabled": False,
                "built": False,
                "reason": self.not_built,
                "kind": self.kind,
                "section": section,
                "gpus": 0,
            }
        return {
            "enabled": True,
            "built": True,
            **self.allocation.to_dict(),
            "written": self.written,
            "inherited_from": self.inherited_from,
            "kind": "inference" if self.allocation.is_inference else "training",
            "section": section,
            "controller": self.controller,
            "replicas": self.replicas,
            "gpus_per_worker": 0 if cpu_run else self.per_worker,
            "gpus": 0 if cpu_run else self.gpus,
            "scheduling": "colocation" if self.colocated_with else "separation",
            "colocated_with": self.colocated_with,
            "gpu_owner": self.owner,
            "awex_shared": self.awex_shared,
            "offloaded": self.offloaded,
            "fork": self.fork,
            "nodes": list(self.nodes),
            "slots": [list(slot) for slot in self.slots],
            "memory": None if self.memory is None else self.memory.gb(),
            "step_seconds": None if self.step_seconds is None else round(self.step_seconds, 3),
        }


@dataclass(frozen=True)
class SchedulerRules:
    """``scheduler.type`` as written and the rules the plan followed for it: ``local``,
    ``slurm``, ``ray``, ``null`` (the rules every scheduler shares), or ``any`` where the
    AReaL version's rules do not depend on the scheduler."""

    type: object = None
    column: str = "any"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "rules": self.column}


@dataclass(frozen=True)
class Plan:
    engines: dict[str, EnginePlan]
    n_nodes: int
    n_gpus_per_node: int
    warnings: tuple[str, ...] = field(default=())
    #: The id of the rule that gave each warning, in the same order (None: no rule's,
    #: e.g. which AReaL version's rules apply).
    warning_rules: tuple[str | None, ...] = field(default=())
    memory_note: str = ""  # why no engine has a memory estimate, when none has
    rules: RulesChoice | None = None  # the AReaL rules it was checked with
    scheduler: SchedulerRules = field(default_factory=SchedulerRules)
    model_source: str = ""  # where the model shape came from, when it is known
    #: Nodes the placement uses: more than ``n_nodes`` when a scheduler that does not
    #: read ``cluster.n_nodes`` (Slurm, Ray) is given more work than it declares.
    placed_nodes: int | None = None
    speed_note: str = ""  # how the engines' step times were predicted, when they were
    #: What predicting the RL step needs (an RL config whose model shape and batch are
    #: known; see :attr:`rl_step`).
    rl_inputs: RLInputs | None = field(default=None, repr=False, compare=False)
    #: Where ``n_gpus_per_node`` came from: on the local scheduler the machine's GPUs
    #: (``CUDA_VISIBLE_DEVICES=0,1,2,3``); None: ``cluster.n_gpus_per_node``.
    gpus_from: GpuCount | None = None

    @property
    def cpu_run(self) -> bool:
        """``cluster.n_gpus_per_node: 0``: engines run as processes without GPUs."""
        return self.n_gpus_per_node == 0

    @property
    def node_count(self) -> int:
        """The nodes of the GPU map."""
        return max(self.n_nodes, self.placed_nodes or 0)

    @property
    def available_gpus(self) -> int:
        return self.n_nodes * self.n_gpus_per_node

    @property
    def used_gpus(self) -> int:
        """GPUs taken by separated engines (colocated ones share their target's)."""
        if self.cpu_run:
            return 0
        return sum(e.gpus for e in self.engines.values() if not e.colocated_with)

    @property
    def idle_gpus(self) -> int:
        return max(0, self.available_gpus - self.used_gpus)

    def gpus_by_engine(self) -> dict[str, int]:
        """GPUs of each built engine (its world size; on a CPU run, what it would need)."""
        return {name: e.gpus for name, e in self.engines.items() if e.enabled}

    def not_built(self) -> dict[str, str]:
        """The engines of the config that are not built, with the reason."""
        return {name: e.not_built or "" for name, e in self.engines.items() if not e.enabled}

    def idle_slots(self) -> list[Slot]:
        taken = {slot for e in self.engines.values() if not e.colocated_with for slot in e.slots}
        return [
            (node, gpu)
            for node in range(self.node_count)
            for gpu in range(self.n_gpus_per_node)
            if (node, gpu) not in taken
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "areal_rules": None if self.rules is None else self.rules.to_dict(),
            "scheduler": self.scheduler.to_dict(),
            "cluster": {
                "n_nodes": self.n_nodes,
                "n_gpus_per_node": self.n_gpus_per_node,
                "gpus_per_node_from": DECLARED if self.gpus_from is None else self.gpus_from.source,
            },
            "cpu_run": self.cpu_run,
            "gpus": {
                "available": self.available_gpus,
                "used": self.used_gpus,
                "idle": self.idle_gpus,
            },
            "engines": {name: e.to_dict(self.cpu_run) for name, e in self.engines.items()},
            "warnings": list(self.warnings),
            "warning_rules": list(self.warning_rules),
            "memory_note": self.memory_note or None,
            "model_source": self.model_source or None,
            "speed_note": self.speed_note or None,
            "rl_step": None if self.rl_step is None else self.rl_step.to_dict(),
        }

    @functools.cached_property
    def rl_step(self) -> RLStep | None:
        """The predicted RL step (:func:`areal_conf.perf.rl_step.rl_step`), predicted the
        first time it is asked for; None when the config's step cannot be predicted."""
        from areal_conf.errors import AllocationError
        from areal_conf.perf.rl_step import rl_step

        inputs = self.rl_inputs
        if inputs is None or self.cpu_run:
            return None
        try:
            return rl_step(
                inputs.run,
                self.rl_engines(),
                inputs.shape,
                gpu=inputs.gpu,
                n_gpus_per_node=self.n_gpus_per_node,
                mean_response_tokens=inputs.mean_response_tokens,
            )
        except AllocationError:  # e.g. no rollout layout whose KV cache holds a sequence
            return None

    def rl_engines(self) -> dict[str, RLEngine]:
        """The built engines as :func:`areal_conf.perf.rl_step.rl_step` takes them."""
        return rl_engines(self.engines)


def rl_engines(engines: Mapping[str, EnginePlan]) -> dict[str, RLEngine]:
    """Each built engine's layout, nodes, the engine whose GPUs it shares, and the bytes
    a GPU of it holds between steps (its memory estimate's weights, gradients and
    optimizer state; nothing when its memory is unknown)."""
    from areal_conf.perf.rl_step import RLEngine

    found: dict[str, RLEngine] = {}
    for name, e in engines.items():
        if e.allocation is None:
            continue
        m = e.memory
        found[name] = RLEngine(
            e.allocation,
            e.nodes,
            e.colocated_with,
            0.0 if m is None else m.weights + m.grads + m.optimizer,
            e.own_shape,
        )
    return found

"""The allocation plan: GPUs per engine, colocation, and concrete GPU slots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from areal_conf.allocation import ModelAllocation
from areal_conf.areal_versions import RulesChoice
from areal_conf.backends import MAX_SIZE
from areal_conf.errors import AllocationError
from areal_conf.local_gpus import DECLARED, GpuCount
from areal_conf.memory import MemoryEstimate

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
    # Predicted seconds of a training step (areal_conf.speed); None: not predicted.
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
    memory_note: str = ""  # why no engine has a memory estimate, when none has
    rules: RulesChoice | None = None  # the AReaL rules it was checked with
    scheduler: SchedulerRules = field(default_factory=SchedulerRules)
    model_source: str = ""  # where the model shape came from, when it is known
    #: Nodes the placement uses: more than ``n_nodes`` when a scheduler that does not
    #: read ``cluster.n_nodes`` (Slurm, Ray) is given more work than it declares.
    placed_nodes: int | None = None
    speed_note: str = ""  # how the engines' step times were predicted, when they were
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
            "memory_note": self.memory_note or None,
            "model_source": self.model_source or None,
            "speed_note": self.speed_note or None,
        }


# -- placement -------------------------------------------------------------------------


def place(
    engines: list[tuple[str, ModelAllocation]], n_nodes: int, n_gpus_per_node: int
) -> dict[str, tuple[Slot, ...]]:
    """Concrete GPUs for each separated engine, in the given order.

    An inference instance (tp × pp GPUs) stays within one node when it fits in one and
    takes whole nodes when it is larger; instances go first-fit to the lowest node with
    room. A training engine's tensor-parallel groups (tp consecutive ranks) stay within
    one node when tp fits, and the engine takes whole free nodes first, so that its
    groups share nodes with no other engine: the part that does not fill a whole node
    goes to the first node with leftovers that holds all of it, else to the next free
    node. The result is deterministic.

    Linear in the number of GPUs: a node's free GPUs are always its highest-numbered
    ones (GPUs are taken from the lowest free index up), so one count per node is the
    whole state, and each engine walks the nodes once. Raises AllocationError for a
    cluster of more than 2**20 GPUs (see :func:`check_cluster_size`).
    """
    check_cluster_size(n_nodes, n_gpus_per_node)
    size = n_gpus_per_node
    used = [0] * n_nodes  # GPUs taken on each node: always its lowest-numbered ones
    placed: dict[str, tuple[Slot, ...]] = {}
    for name, alloc in engines:
        block = alloc.instance_size if alloc.is_inference else alloc.parallel.tp_size
        count = alloc.world_size // block
        if block > size and alloc.is_inference and block % size:
            raise AllocationError(
                f"{name}: an instance of {block} GPUs (t×p) is larger than a node "
                f"({size} GPUs) but not a whole number of nodes",
                str(alloc),
                None,
                hint=f"make t×p a divisor or a multiple of {size}",
            )
        if alloc.is_inference and block > size:
            free = [node for node in range(n_nodes) if used[node] == 0]
            slots = _fill(used, size, free, count * block)
        elif alloc.is_inference:
            slots = _first_fit(used, size, range(n_nodes), block, count)
        else:
            slots = _place_training(used, size, block, count)
        if slots is None:
            raise _does_not_fit(name, alloc, block, n_nodes, size, engines)
        placed[name] = tuple(slots)
    return placed


def place_whole_nodes(
    engines: list[tuple[str, ModelAllocation]], n_gpus_per_node: int
) -> tuple[dict[str, tuple[Slot, ...]], int]:
    """Each engine on whole nodes of its own, one after another, as AReaL's Slurm
    scheduler submits them (one job per engine, ``ceil(GPUs / n)`` nodes); the slots and
    the nodes used."""
    placed: dict[str, tuple[Slot, ...]] = {}
    node = 0
    for name, alloc in engines:
        nodes = -(-alloc.world_size // n_gpus_per_node)
        check_cluster_size(node + nodes, n_gpus_per_node)
        placed[name] = tuple(
            (node + i // n_gpus_per_node, i % n_gpus_per_node) for i in range(alloc.world_size)
        )
        node += nodes
    return placed, node


def check_cluster_size(n_nodes: int, n_gpus_per_node: int) -> None:
    """A cluster holds at most 2**20 GPUs, the largest world size a backend string can
    ask for: larger sizes are a typo, and planning them would take unbounded time and
    memory."""
    total = n_nodes * n_gpus_per_node
    if total <= MAX_SIZE:
        return
    raise AllocationError(
        f"cluster: {n_nodes:,} node{'s' if n_nodes != 1 else ''} × {n_gpus_per_node:,} GPUs "
        f"is {total:,} GPUs, more than the {MAX_SIZE:,} (2**20) that areal-conf plans for, "
        "the largest world size an engine can have",
        None,
        None,
        hint="check cluster.n_nodes and cluster.n_gpus_per_node (the GPUs of one node, "
        "e.g. cluster.n_gpus_per_node=8)",
    )


def placement_warnings(
    engines: list[tuple[str, ModelAllocation]], n_gpus_per_node: int
) -> tuple[str, ...]:
    """Warnings about layouts that place but run badly: a training engine whose
    tensor-parallel groups are larger than a node (tp traffic then crosses nodes)."""
    warnings = []
    for name, alloc in engines:
        tp = alloc.parallel.tp_size
        if not alloc.is_inference and tp > n_gpus_per_node > 0:
            nodes = -(-tp // n_gpus_per_node)
            warnings.append(
                f"{name}: tensor-parallel groups of {tp} GPUs ({alloc}) span {nodes} nodes "
                f"of {n_gpus_per_node} GPUs, so every layer's tp traffic crosses the network; "
                f"keep t ≤ {n_gpus_per_node} and move the rest to d (or p, c with megatron)"
            )
    return tuple(warnings)


def _first_fit(
    used: list[int], size: int, order: Sequence[int], block: int, count: int
) -> list[Slot] | None:
    """``count`` blocks of ``block`` GPUs, each within one node, first-fit along ``order``.

    A node skipped for lack of room never gains room, so one pass suffices; a node takes
    every block it has room for at once (what block-by-block first-fit gives)."""
    slots: list[Slot] = []
    left = count
    for node in order:
        if left == 0:
            break
        n = min((size - used[node]) // block, left)
        if n:
            end = used[node] + n * block
            slots.extend(zip(repeat(node), range(used[node], end)))
            used[node] = end
            left -= n
    return slots if left == 0 else None


def _fill(used: list[int], size: int, order: Sequence[int], gpus: int) -> list[Slot] | None:
    """``gpus`` free GPUs along ``order``, node after node."""
    if sum(size - used[node] for node in order) < gpus:
        return None
    slots: list[Slot] = []
    for node in order:
        take = min(size - used[node], gpus - len(slots))
        slots.extend(zip(repeat(node), range(used[node], used[node] + take)))
        used[node] += take
        if len(slots) == gpus:
            break
    return slots


def _place_training(used: list[int], size: int, block: int, count: int) -> list[Slot] | None:
    free = [node for node, n in enumerate(used) if n == 0]
    partial = [node for node, n in enumerate(used) if 0 < n < size]
    if block > size:
        # tp larger than a node cannot stay within one (placement_warnings says so):
        # whole free nodes first, then leftovers.
        return _fill(used, size, free + partial, count * block)
    per_node = size // block
    whole = min(count // per_node, len(free))
    slots = _first_fit(used, size, free[:whole], block, whole * per_node) or []
    rest = count - whole * per_node
    if rest == 0:
        return slots
    # The rest in one node if one holds it (leftovers first, keeping free nodes whole),
    # else block by block, free nodes first.
    candidates = [*partial, *free[whole:]]
    home = next((n for n in candidates if size - used[n] >= rest * block), None)
    more = _first_fit(
        used, size, [home] if home is not None else free[whole:] + partial, block, rest
    )
    return None if more is None else slots + more


def _does_not_fit(
    name: str,
    alloc: ModelAllocation,
    block: int,
    n_nodes: int,
    size: int,
    engines: list[tuple[str, ModelAllocation]],
) -> AllocationError:
    if alloc.is_inference:
        unit = f"{alloc.num_instances} server instances of {block} GPUs"
        rule = "each within one node" if block <= size else "each on whole nodes"
    else:
        unit = f"{alloc.world_size // block} tensor-parallel groups of {block} GPUs"
        rule = "each within one node"
    per_node = size // block if block <= size else 0
    if per_node:
        fits = f"one node holds {per_node} ({per_node * block} of its {size} GPUs)"
        if alloc.is_inference:
            sizes = [d for d in range(2, size + 1) if size % d == 0 and d >= block // 2]
            hint = f"use instances whose t×p divides {size} (e.g. {', '.join(map(str, sizes[:3]))})"
        else:
            hint = "choose layouts whose tensor-parallel groups fit the GPUs left on a node"
        hint += f", or add nodes: cluster.n_nodes={n_nodes + 1}"
    else:
        fits = f"it needs {block // size} free whole nodes"
        hint = f"add nodes: cluster.n_nodes={n_nodes + block // size}"
    before = [other for other, _ in engines[: [n for n, _ in engines].index(name)]]
    if before:
        fits += f" after {', '.join(before)} took theirs"
    return AllocationError(
        f"{name}: {alloc} does not fit on {n_nodes} × {size} GPUs: {unit}, {rule}; {fits}",
        str(alloc),
        None,
        hint=hint,
    )

"""The allocation plan: GPUs per engine, colocation, and concrete GPU slots (SPEC §7)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from areal_conf.allocation import ModelAllocation
from areal_conf.errors import AllocationError
from areal_conf.memory import GB, MemoryEstimate

Slot = tuple[int, int]  # (node, local GPU index)


@dataclass(frozen=True)
class EnginePlan:
    """One engine's part of the plan; ``allocation`` is None when the engine is disabled."""

    name: str
    allocation: ModelAllocation | None
    written: str  # the backend text as configured ("" when empty)
    inherited_from: str | None = None  # critic/ref with an empty backend use actor's
    colocated_with: str | None = None
    slots: tuple[Slot, ...] = ()
    memory: MemoryEstimate | None = None  # per GPU; None when the model shape is unknown

    @property
    def enabled(self) -> bool:
        return self.allocation is not None

    @property
    def gpus(self) -> int:
        return 0 if self.allocation is None else self.allocation.world_size

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted({node for node, _ in self.slots}))

    def dims_text(self) -> str:
        if self.allocation is None:
            return ""
        p = self.allocation.parallel
        parts = [
            f"{name}{size}"
            for name, size in zip(
                ("dp", "pp", "tp", "cp"), (p.dp_size, p.pp_size, p.tp_size, p.cp_size), strict=True
            )
            if size > 1 or name == "dp"
        ]
        if p.ep_size > 1 or p.etp_size > 1:
            parts += [f"ep{p.ep_size}", f"etp{p.etp_size}", f"edp{p.edp_size}"]
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        if self.allocation is None:
            return {"enabled": False, "gpus": 0}
        return {
            "enabled": True,
            **self.allocation.to_dict(),
            "written": self.written,
            "inherited_from": self.inherited_from,
            "kind": "inference" if self.allocation.is_inference else "training",
            "gpus": self.gpus,
            "scheduling": "colocation" if self.colocated_with else "separation",
            "colocated_with": self.colocated_with,
            "nodes": list(self.nodes),
            "slots": [list(slot) for slot in self.slots],
            "memory": None if self.memory is None else self.memory.gb(),
        }


@dataclass(frozen=True)
class Plan:
    engines: dict[str, EnginePlan]
    n_nodes: int
    n_gpus_per_node: int
    warnings: tuple[str, ...] = field(default=())
    memory_note: str = ""  # why no engine has a memory estimate, when none has

    @property
    def available_gpus(self) -> int:
        return self.n_nodes * self.n_gpus_per_node

    @property
    def used_gpus(self) -> int:
        """GPUs taken by separated engines (colocated ones share their target's)."""
        return sum(e.gpus for e in self.engines.values() if not e.colocated_with)

    @property
    def idle_gpus(self) -> int:
        return self.available_gpus - self.used_gpus

    def gpus_by_engine(self) -> dict[str, int]:
        return {name: e.gpus for name, e in self.engines.items() if e.enabled}

    def idle_slots(self) -> list[Slot]:
        taken = {slot for e in self.engines.values() if not e.colocated_with for slot in e.slots}
        return [
            (node, gpu)
            for node in range(self.n_nodes)
            for gpu in range(self.n_gpus_per_node)
            if (node, gpu) not in taken
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": {"n_nodes": self.n_nodes, "n_gpus_per_node": self.n_gpus_per_node},
            "gpus": {
                "available": self.available_gpus,
                "used": self.used_gpus,
                "idle": self.idle_gpus,
            },
            "engines": {name: e.to_dict() for name, e in self.engines.items()},
            "warnings": list(self.warnings),
            "memory_note": self.memory_note or None,
        }

    def table(self) -> str:
        header = ("engine", "backend", "dims", "GPUs", "scheduling", "nodes", "GB/GPU")
        rows = [header]
        for e in self.engines.values():
            if e.allocation is None:
                rows.append((e.name, "(disabled)", "", "0", "", "", ""))
                continue
            backend = str(e.allocation)
            if e.inherited_from:
                backend += f" (= {e.inherited_from}.backend)"
            scheduling = f"colocated with {e.colocated_with}" if e.colocated_with else "separate"
            memory = "?" if e.memory is None else f"{e.memory.total / GB:.1f}"
            rows.append(
                (e.name, backend, e.dims_text(), str(e.gpus), scheduling, _ranges(e.nodes), memory)
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(
            f"GPUs: {self.used_gpus} used of {self.available_gpus} "
            f"({self.n_nodes} node{'s' if self.n_nodes != 1 else ''} × {self.n_gpus_per_node}), "
            f"{self.idle_gpus} idle"
        )
        if self.memory_note:
            lines.append(self.memory_note)
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _ranges(values: tuple[int, ...]) -> str:
    """0,1,2,5 -> '0-2,5'."""
    if not values:
        return ""
    parts: list[str] = []
    start = prev = values[0]
    for v in (*values[1:], values[-1] + 2):  # a sentinel closes the last run
        if v != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = v
        prev = v
    return ",".join(parts)


# -- placement -------------------------------------------------------------------------


def place(
    engines: list[tuple[str, ModelAllocation]], n_nodes: int, n_gpus_per_node: int
) -> dict[str, tuple[Slot, ...]]:
    """Concrete GPUs for each separated engine, in the given order (SPEC §7).

    An inference instance (tp × pp GPUs) stays within one node when it fits in one and
    takes whole nodes when it is larger; a training engine's tensor-parallel groups (tp
    consecutive ranks) stay within one node when tp fits. Blocks go first-fit to the
    lowest node with room, so the result is deterministic.
    """
    size = n_gpus_per_node
    free = [list(range(size)) for _ in range(n_nodes)]
    placed: dict[str, tuple[Slot, ...]] = {}
    for name, alloc in engines:
        p = alloc.parallel
        block = alloc.instance_size if alloc.is_inference else p.tp_size
        count = alloc.world_size // block
        if block > size and alloc.is_inference and block % size:
            raise AllocationError(
                f"{name}: an instance of {block} GPUs (t×p) is larger than a node "
                f"({size} GPUs) but not a whole number of nodes",
                str(alloc),
                None,
                hint=f"make t×p a divisor or a multiple of {size}",
            )
        slots: list[Slot] = []
        for _ in range(count):
            if block > size and not alloc.is_inference:
                # tp larger than a node cannot stay within one; take any free GPUs.
                taken = _take_any(free, block)
            elif block > size:
                taken = _take_whole_nodes(free, block // size, size)
            else:
                taken = _take_within_node(free, block)
            if taken is None:
                raise _does_not_fit(name, alloc, block, n_nodes, size, engines)
            slots += taken
        placed[name] = tuple(slots)
    return placed


def _take_within_node(free: list[list[int]], block: int) -> list[Slot] | None:
    for node, gpus in enumerate(free):
        if len(gpus) >= block:
            taken, free[node] = gpus[:block], gpus[block:]
            return [(node, gpu) for gpu in taken]
    return None


def _take_whole_nodes(free: list[list[int]], nodes: int, size: int) -> list[Slot] | None:
    empty = [node for node, gpus in enumerate(free) if len(gpus) == size][:nodes]
    if len(empty) < nodes:
        return None
    slots = [(node, gpu) for node in empty for gpu in free[node]]
    for node in empty:
        free[node] = []
    return slots


def _take_any(free: list[list[int]], block: int) -> list[Slot] | None:
    if sum(len(gpus) for gpus in free) < block:
        return None
    slots: list[Slot] = []
    for node, gpus in enumerate(free):
        want = block - len(slots)
        slots += [(node, gpu) for gpu in gpus[:want]]
        free[node] = gpus[want:]
        if len(slots) == block:
            break
    return slots


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

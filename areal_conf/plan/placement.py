"""Where each engine's GPUs are: concrete (node, GPU) slots for separated engines."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

from areal_conf.config.run_config import check_cluster_size
from areal_conf.errors import AllocationError
from areal_conf.hints import either, fix
from areal_conf.plan.plan import Slot
from areal_conf.spec.allocation import ModelAllocation


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
            smaller = (
                f"use instances whose t×p divides {size} (e.g. {', '.join(map(str, sizes[:3]))})"
            )
        else:
            smaller = "choose layouts whose tensor-parallel groups fit the GPUs left on a node"
        hint = either(smaller, ", or ", fix(f"cluster.n_nodes={n_nodes + 1}", lead="add nodes: "))
    else:
        fits = f"it needs {block // size} free whole nodes"
        hint = either(fix(f"cluster.n_nodes={n_nodes + block // size}", lead="add nodes: "))
    before = [other for other, _ in engines[: [n for n, _ in engines].index(name)]]
    if before:
        fits += f" after {', '.join(before)} took theirs"
    return AllocationError(
        f"{name}: {alloc} does not fit on {n_nodes} × {size} GPUs: {unit}, {rule}; {fits}",
        str(alloc),
        hint=hint,
    )

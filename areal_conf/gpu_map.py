"""A per-node picture of a plan: which engine holds each GPU.

One line per node, one letter per GPU, then a legend::

    GPU     0 1 2 3 4 5 6 7
    node 0  R R R R R R R R
    node 1  A A A A A A A A

    R = rollout  sglang:d2t4  8 GPUs on node 0
    A = actor    fsdp:d4t2    8 GPUs on node 1, shared with critic, ref (colocated)

Colocated engines have no letter of their own: the legend names them next to the engine
whose GPUs they share (the end of their colocation chain). ``.`` is an idle GPU. Engines
of the config that are not built are listed below the legend with the reason; a CPU
run (no GPUs per node) has no map. Consecutive nodes whose lines are identical
collapse into one (``nodes 2-61  A A A A A A A A``), so a 64-node plan stays a few lines.
"""

from __future__ import annotations

from typing import Final

from areal_conf.plan import Plan, _ranges

IDLE: Final = "."
CONFLICT: Final = "!"  # a GPU that two separated engines claim (never after place())
# Above this many GPUs per node the letters are written without blanks and without the
# index header, so a line stays within a terminal.
_SPACED_UP_TO: Final = 32


def engine_letters(plan: Plan) -> dict[str, str]:
    """A letter for each enabled separated engine: the first letter of its name not
    already taken (rollout R, actor A, critic C, ref E, teacher T), else the first free
    letter of the alphabet."""
    letters: dict[str, str] = {}
    for name, e in plan.engines.items():
        if not e.enabled or e.colocated_with:
            continue
        taken = set(letters.values())
        candidates = [c.upper() for c in name if c.isalpha()]
        candidates += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
        letters[name] = next((c for c in candidates if c not in taken), "?")
    return letters


def node_cells(plan: Plan) -> list[list[str]]:
    """``cells[node][gpu]``: the letter of the engine holding that GPU, ``.`` if idle."""
    letters = engine_letters(plan)
    cells = [[IDLE] * plan.n_gpus_per_node for _ in range(plan.n_nodes)]
    for name, letter in letters.items():
        for node, gpu in plan.engines[name].slots:
            if 0 <= node < plan.n_nodes and 0 <= gpu < plan.n_gpus_per_node:
                cells[node][gpu] = letter if cells[node][gpu] == IDLE else CONFLICT
    return cells


def render_gpu_map(plan: Plan) -> str:
    """The map and its legend as text (no trailing newline)."""
    if plan.cpu_run:
        return "\n".join(["(CPU run: no GPUs to map)", *_not_built(plan)])
    per_node = plan.n_gpus_per_node
    spaced = per_node <= _SPACED_UP_TO
    width = len(str(per_node - 1)) if spaced else 1
    sep = " " if spaced else ""

    def line(cells: list[str]) -> str:
        return sep.join(c.ljust(width) for c in cells).rstrip()

    cells = node_cells(plan)
    rows: list[tuple[str, str]] = []  # (label, cells), runs of identical nodes collapsed
    start = 0
    for node in range(1, plan.n_nodes + 1):
        if node < plan.n_nodes and cells[node] == cells[start]:
            continue
        label = f"node {start}" if node - 1 == start else f"nodes {start}-{node - 1}"
        rows.append((label, line(cells[start])))
        start = node

    label_width = max([len("GPU"), *(len(label) for label, _ in rows)])
    lines = []
    if spaced:
        lines.append(f"{'GPU':<{label_width}}  " + line([str(g) for g in range(per_node)]))
    lines += [f"{label:<{label_width}}  {row}" for label, row in rows]
    lines.append("")
    lines += _legend(plan, cells)
    lines += _not_built(plan)
    return "\n".join(lines)


def _not_built(plan: Plan) -> list[str]:
    return [f"{name}: not built ({reason})" for name, reason in plan.not_built().items()]


def _legend(plan: Plan, cells: list[list[str]]) -> list[str]:
    letters = engine_letters(plan)
    entries: list[tuple[str, str, str, str]] = []  # (letter, name, backend, where)
    for name, letter in letters.items():
        e = plan.engines[name]
        sharing = [
            other.name
            for other in plan.engines.values()
            if other.enabled and other.colocated_with and other.owner == name
        ]
        where = _gpus_on(len(e.slots), e.nodes)
        if len(e.slots) != e.gpus:
            where += f" (needs {e.gpus})"
        if sharing:
            where += f", shared with {', '.join(sharing)} (colocated)"
        entries.append((letter, name, str(e.allocation), where))
    idle = [(node, gpu) for node, row in enumerate(cells) for gpu, c in enumerate(row) if c == IDLE]
    if idle:
        entries.append((IDLE, "idle", "", _gpus_on(len(idle), tuple(sorted({n for n, _ in idle})))))
    clash = [(n, g) for n, row in enumerate(cells) for g, c in enumerate(row) if c == CONFLICT]
    if clash:
        nodes = tuple(sorted({n for n, _ in clash}))
        entries.append((CONFLICT, "conflict", "", _gpus_on(len(clash), nodes) + " held twice"))
    if not entries:
        return ["(no GPUs)"]
    name_w = max(len(name) for _, name, _, _ in entries)
    backend_w = max(len(backend) for _, _, backend, _ in entries)
    return [
        f"{letter} = {name:<{name_w}}  {backend:<{backend_w}}  {where}"
        for letter, name, backend, where in entries
    ]


def _gpus_on(count: int, nodes: tuple[int, ...]) -> str:
    gpus = f"{count} GPU{'s' if count != 1 else ''}"
    if not nodes:
        return gpus
    return f"{gpus} on node{'s' if len(nodes) > 1 else ''} {_ranges(nodes)}"

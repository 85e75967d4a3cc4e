"""All text areal-conf prints about a layout: it reads allocations, plans, memory
estimates and rank groups, and returns strings (no printing, no argument parsing).

- :func:`describe_allocation`: what one backend string means, in a few lines.
- :func:`plan_table`: one row per engine of a plan, the GPU count and the warnings.
- :func:`render_gpu_map`: which engine holds each GPU, one line per node, and a legend.
- :func:`memory_breakdown` and :func:`memory_text`: memory per GPU, term by term or short.
- :func:`format_rank_groups`, :func:`rank_placement` and :func:`plan_rank_groups`: the
  Megatron rank groups of training engines and the GPUs their ranks run on.
- :func:`plan_report` and :func:`allocation_report`: what ``python -m areal_conf explain``
  prints for a config and for one backend string.

The GPU map: one line per node, one letter per GPU, then a legend::

    GPU     0 1 2 3 4 5 6 7
    node 0  R R R R R R R R
    node 1  A A A A A A A A

    R = rollout  sglang:d2t4  8 GPUs on node 0
    A = actor    fsdp:d4t2    8 GPUs on node 1, shared with critic, ref (colocated)

Colocated engines have no letter of their own: the legend names them next to the engine
whose GPUs they share (the end of their colocation chain). ``.`` is an idle GPU. Engines
of the config that are not built hold no GPU: the plan table lists them with the reason,
once (train.py and ``explain`` print the table above the map). A CPU run (no GPUs per
node) has no map. Consecutive nodes whose lines are identical
collapse into one (``nodes 2-61  A A A A A A A A``), so a 64-node plan stays a few lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from areal_conf.areal.local_gpus import CUDA_ENV
from areal_conf.perf.memory import GB
from areal_conf.perf.memory_fixes import shared_peak
from areal_conf.spec.mesh import DEFAULT_ORDER, group_kinds

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from areal_conf.perf.decode import DecodeThroughput
    from areal_conf.perf.memory import MemoryEstimate
    from areal_conf.perf.ranking import RankedLayout
    from areal_conf.perf.rl_step import RLStep
    from areal_conf.plan.plan import EnginePlan, Plan, Slot
    from areal_conf.spec.allocation import ModelAllocation

IDLE: Final = "."
CONFLICT: Final = "!"  # a GPU that two separated engines claim (never after place())
# Above this many GPUs per node the letters are written without blanks and without the
# index header, so a line stays within a terminal.
_SPACED_UP_TO: Final = 32


# -- one backend string ------------------------------------------------------------------


def describe_allocation(alloc: ModelAllocation) -> str:
    """A few lines a person reads to check what a backend string means."""
    p = alloc.parallel
    lines = [
        f"{alloc}  ({alloc.backend}, {'inference' if alloc.is_inference else 'training'})",
        f"  GPUs: {alloc.world_size}",
    ]
    if alloc.is_inference:
        lines.append(
            f"  {alloc.num_instances} server instance(s) × {alloc.instance_size} GPU(s) "
            f"(tp {p.tp_size} × pp {p.pp_size})"
        )
    else:
        lines.append(f"  attention: dp {p.dp_size}  pp {p.pp_size}  tp {p.tp_size}  cp {p.cp_size}")
        lines.append(
            f"  experts:   edp {p.edp_size}  pp {p.pp_size}  etp {p.etp_size}  ep {p.ep_size}"
        )
    return "\n".join(lines)


def allocation_report(
    alloc: ModelAllocation,
    placed: Plan | None = None,
    *,
    groups: bool = False,
    order: str = DEFAULT_ORDER,
) -> str:
    """What ``explain`` prints for one backend string: its description, the GPU map of
    ``placed`` (the backend alone on a cluster) when given, its rank groups with ``groups``."""
    lines = [describe_allocation(alloc)]
    if placed is not None:
        lines += ["", render_gpu_map(placed)]
    if groups:
        lines.append("")
        if alloc.is_inference:
            lines.append(
                f"rank groups: none ({alloc.backend} runs {alloc.num_instances} "
                f"independent server instance(s) of {alloc.instance_size} GPU(s))"
            )
        else:
            lines.append(f"rank groups (order {order})")
            text = format_rank_groups(group_kinds(alloc, order))
            lines += ["  " + line for line in text.splitlines()]
    return "\n".join(lines)


# -- a plan ------------------------------------------------------------------------------


def plan_report(plan: Plan, *, groups: bool = False, order: str = DEFAULT_ORDER) -> str:
    """What ``explain --config`` prints: the table, the GPU map, the memory breakdown and,
    with ``groups``, the rank groups of the training engines."""
    parts = [plan_table(plan), render_gpu_map(plan)]
    if not plan.memory_note:  # the table already says why there is no breakdown
        parts.append(memory_breakdown(plan))
    if groups:
        parts.append(plan_rank_groups(plan, order))
    return "\n\n".join(parts)


def plan_table(plan: Plan) -> str:
    """One row per engine (the ``on`` column: the nodes it runs on), then the GPU
    summary, where the local scheduler's GPUs were counted, the engines not built, why
    memory is unknown, and the warnings. A training engine's predicted seconds a
    training step (``s/step``) is a column when some engine has one."""
    timed = any(e.step_seconds is not None for e in plan.engines.values())
    header: tuple[str, ...] = ("engine", "backend", "dims", "GPUs", "scheduling", "on", "GB/GPU")
    if timed:
        header += ("s/step",)
    rows = [header]
    for e in plan.engines.values():
        if e.allocation is None:
            rows.append((e.name, "(not built)", "", "0", *[""] * (len(header) - 4)))
            continue
        backend = str(e.allocation)
        if e.inherited_from:
            backend += f" (= {e.inherited_from}.backend)"
        gpus = "-" if plan.cpu_run else str(e.gpus)
        memory = "?" if e.memory is None else f"{e.memory.total / GB:.1f}"
        row: tuple[str, ...] = (
            e.name,
            backend,
            dims_text(e),
            gpus,
            scheduling_text(e),
            nodes_text(e.nodes),
            memory,
        )
        if timed:
            row += ("-" if e.step_seconds is None else seconds_text(e.step_seconds),)
        rows.append(row)
    lines = columns(rows, rule=True)
    lines.append(plan_summary(plan))
    machine = machine_line(plan)
    if machine:
        lines.append(machine)
    lines += _not_built(plan)
    if plan.rules is not None:
        lines.append(rules_line(plan))
    if plan.model_source:
        lines.append(f"model: {plan.model_source}")
    if plan.memory_note:
        lines.append(plan.memory_note)
    if timed and plan.speed_note:
        lines.append(plan.speed_note)
    if plan.rl_step is not None:
        lines.append(rl_step_line(plan.rl_step))
    lines += [warning_line(w, rule) for w, rule in _with_rules(plan)]
    return "\n".join(lines)


def warning_line(text: str, rule: str | None) -> str:
    """A warning as printed: the text, and the rule that gave it, as an error names its."""
    return f"warning: {text}" + (f" (rule: {rule})" if rule else "")


def _with_rules(plan: Plan) -> list[tuple[str, str | None]]:
    rules = list(plan.warning_rules) + [None] * (len(plan.warnings) - len(plan.warning_rules))
    return list(zip(plan.warnings, rules, strict=True))


def columns(rows: Sequence[tuple[str, ...]], *, rule: bool = False) -> list[str]:
    """``rows`` as lines of left-aligned columns two spaces apart; with ``rule``, a line
    of dashes under the first row (the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def ranked_layout_rows(ranked: Sequence[RankedLayout], number: str) -> list[tuple[str, ...]]:
    """Training layouts ranked by predicted step time: rank, layout, s/step, MFU, GB/GPU
    (``number`` heads the rank column)."""
    rows: list[tuple[str, ...]] = [(number, "layout", "s/step", "MFU", "GB/GPU")]
    for i, r in enumerate(ranked, 1):
        memory = f"{r.memory.total / GB:.1f}" + ("" if r.fits else " (does not fit)")
        rows.append((str(i), r.spec, seconds_text(r.seconds), f"{r.step.mfu:.0%}", memory))
    return rows


def decode_rows(
    ranked: Sequence[tuple[str, DecodeThroughput]], number: str
) -> list[tuple[str, ...]]:
    """Inference layouts ranked by decode throughput: rank, layout, tokens/s, batch,
    what binds."""
    rows: list[tuple[str, ...]] = [(number, "layout", "tokens/s", "batch", "bound")]
    for i, (spec, rate) in enumerate(ranked, 1):
        batch = str(rate.batch) + (" (KV cache full)" if rate.kv_limited else "")
        rows.append((str(i), spec, f"{rate.tokens_per_s:,.0f}", batch, rate.bound))
    return rows


def seconds_text(seconds: float) -> str:
    """Three significant figures: ``0.412``, ``12.3``, ``1,234``."""
    if seconds >= 1000:
        return f"{seconds:,.0f}"
    return f"{seconds:.3g}"


def rl_step_line(step: RLStep) -> str:
    """One line: ``RL step: 41.2 s predicted (asynchronous, generation-bound; 12,345 trained
    tokens/s): generate 38, train 20.1, update_weights 3.2``."""
    terms = ", ".join(f"{name} {seconds_text(s)}" for name, s in step.phases.items() if s)
    left = f"; not counted: {', '.join(step.not_counted)}" if step.not_counted else ""
    return (
        f"RL step: {seconds_text(step.step_seconds)} s predicted ({step.mode}, {step.bound}-"
        f"bound; {step.tokens_per_s:,.0f} trained tokens/s): {terms}{left}"
    )


def plan_summary(plan: Plan) -> str:
    """The last line of the table: GPUs used, or what a CPU run means."""
    if plan.cpu_run:
        n = sum(e.replicas for e in plan.engines.values() if e.enabled)
        return (
            f"CPU run (cluster.n_gpus_per_node: 0): {n} engine process"
            f"{'es' if n != 1 else ''} on {plan.n_nodes} node"
            f"{'s' if plan.n_nodes != 1 else ''}, no GPUs, nothing to place"
        )
    nodes = f"{plan.n_nodes} node{'s' if plan.n_nodes != 1 else ''} × {plan.n_gpus_per_node}"
    if plan.scheduler.column == "local":
        nodes = f"one machine × {plan.n_gpus_per_node}, local scheduler"
    if plan.used_gpus > plan.available_gpus:
        return (
            f"GPUs: {plan.used_gpus} used, {plan.available_gpus} declared ({nodes}): the "
            f"scheduler is asked for {plan.node_count} nodes"
        )
    return f"GPUs: {plan.used_gpus} used of {plan.available_gpus} ({nodes}), {plan.idle_gpus} idle"


def machine_line(plan: Plan) -> str:
    """``machine: 8 GPUs from CUDA_VISIBLE_DEVICES=...``: where the local scheduler's GPUs
    were counted ("" for other schedulers, which read ``cluster.n_gpus_per_node``)."""
    gpus = plan.gpus_from
    if plan.scheduler.column != "local" or plan.cpu_run or gpus is None:
        return ""
    text = f"machine: {gpus.count} GPU{'s' if gpus.count != 1 else ''} from {gpus.source}"
    if gpus.from_config:
        text += (
            f" (AReaL's local scheduler counts {CUDA_ENV} or the GPUs of the machine it runs on)"
        )
    return text


def rules_line(plan: Plan) -> str:
    """``rules: AReaL 2.0 (...); scheduler.type slurm``: whose rules the plan follows."""
    assert plan.rules is not None
    text = f"rules: {plan.rules.describe()}"
    column = plan.scheduler.column
    if column == "null":
        text += "; scheduler.type null: the rules every scheduler shares"
    elif column != "any":
        text += f"; scheduler.type {column}"
    return text


def dims_text(engine: EnginePlan) -> str:
    """The table's dims column: ``dp4 tp2``; dp always, other sizes when above 1."""
    if engine.allocation is None:
        return ""
    p = engine.allocation.parallel
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


def scheduling_text(engine: EnginePlan) -> str:
    """The table's scheduling column: ``separate`` or ``colocated with actor``."""
    if engine.awex_shared:
        return f"shares {engine.colocated_with}'s GPUs (AWEX)"
    if engine.colocated_with is None:
        return "separate"
    text = f"colocated with {engine.colocated_with}"
    if engine.owner != engine.colocated_with:
        text += f" (GPUs of {engine.owner})"
    if not engine.fork:
        text += ", no fork"
    return text


def nodes_text(nodes: tuple[int, ...]) -> str:
    """The nodes an engine runs on, by index: ``node 0``, ``nodes 0-2,5``."""
    if not nodes:
        return ""
    return f"node{'s' if len(nodes) > 1 else ''} {_ranges(nodes)}"


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


def _not_built(plan: Plan) -> list[str]:
    return [f"{name}: not built ({reason})" for name, reason in plan.not_built().items()]


# -- the GPU map -------------------------------------------------------------------------


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
    cells = [[IDLE] * plan.n_gpus_per_node for _ in range(plan.node_count)]
    for name, letter in letters.items():
        for node, gpu in plan.engines[name].slots:
            if 0 <= node < plan.node_count and 0 <= gpu < plan.n_gpus_per_node:
                cells[node][gpu] = letter if cells[node][gpu] == IDLE else CONFLICT
    return cells


def render_gpu_map(plan: Plan) -> str:
    """The map and its legend as text (no trailing newline)."""
    if plan.cpu_run:
        return "(CPU run: no GPUs to map)"
    per_node = plan.n_gpus_per_node
    spaced = per_node <= _SPACED_UP_TO
    width = len(str(per_node - 1)) if spaced else 1
    sep = " " if spaced else ""

    def line(cells: list[str]) -> str:
        return sep.join(c.ljust(width) for c in cells).rstrip()

    cells = node_cells(plan)
    rows: list[tuple[str, str]] = []  # (label, cells), runs of identical nodes collapsed
    start = 0
    for node in range(1, plan.node_count + 1):
        if node < plan.node_count and cells[node] == cells[start]:
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
    return "\n".join(lines)


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
    return f"{gpus} on {nodes_text(nodes)}"


# -- memory ------------------------------------------------------------------------------


def memory_breakdown(plan: Plan) -> str:
    """Each engine's memory per GPU, term by term (GB = 10^9 bytes)."""
    if plan.memory_note:
        return plan.memory_note
    known = [e.memory for e in plan.engines.values() if e.memory is not None]
    if not known:
        return "memory per GPU: no engine"
    lines = [f"memory per GPU (GB = 10^9 bytes; a GPU has {known[0].capacity / GB:g} GB)"]
    for e in plan.engines.values():
        if e.allocation is None or e.memory is None:
            continue
        est = e.memory
        what = {"training": "training", "forward": "forward only", "inference": "inference"}
        lines.append(f"  {e.name} ({e.allocation}, {what[est.kind]}): {est.breakdown()}")
        lines += [f"    note: {note}" for note in est.notes]
    shared: dict[str, list[str]] = {}
    for e in plan.engines.values():
        if e.memory is not None and e.colocated_with:
            shared.setdefault(e.owner, [e.owner]).append(e.name)
    for owner, names in shared.items():
        sizes = {n: m for n in names if (m := plan.engines[n].memory) is not None}
        leaving = [n for n in sizes if plan.engines[n].offloaded]
        peak = shared_peak(sizes, leaving)
        line = f"  on {owner}'s GPUs: {' + '.join(names)}"
        if leaving:
            who = " and ".join(filter(None, (", ".join(leaving[:-1]), leaving[-1])))
            turns = "leaves the GPUs while the others run" if len(leaving) == 1 else "take turns"
            resident = sum(m.total for m in sizes.values())
            line += (
                f": {peak / GB:.1f} GB at the most at once ({who} {turns}; "
                f"{resident / GB:.1f} GB if all stayed resident)"
            )
        else:
            line += f" = {peak / GB:.1f} GB, all resident"
        lines.append(line)
    return "\n".join(lines)


def memory_text(est: MemoryEstimate) -> str:
    """``41.2 GB/GPU`` (training) or ``17.6 GB/GPU weights, 54.4 GB KV cache`` (inference)."""
    if est.kind == "inference":
        return (
            f"{est.weights / GB:.1f} GB/GPU weights, {est.kv_cache / GB:.1f} GB KV cache "
            f"({est.kv_cache_tokens or 0:,} tokens)"
        )
    return f"{est.total / GB:.1f} GB/GPU"


# -- rank groups -------------------------------------------------------------------------


def format_rank_groups(
    groups: Mapping[str, Sequence[Sequence[int]]],
    *,
    max_groups: int = 3,
    max_ranks: int = 8,
) -> str:
    """Render ``rank_groups`` output as text, one line per kind, concise for big worlds.

    Each line names the kind, the number and size of its groups, and the first
    ``max_groups`` groups; a group longer than ``max_ranks`` shows its first ranks, ``...``
    and its last rank.
    """
    width = max((len(k) for k in groups), default=0)
    lines = []
    for key, kind in groups.items():
        n = len(kind)
        size = len(kind[0]) if n else 0
        shown = "  ".join(_format_group(g, max_ranks) for g in kind[: max(0, max_groups)])
        more = f"  ... ({n - max_groups} more)" if n > max_groups else ""
        plural = "group" if n == 1 else "groups"
        lines.append(f"{key:<{width}}  {n} {plural} of {size}: {shown}{more}")
    return "\n".join(lines)


def _format_group(group: Sequence[int], max_ranks: int) -> str:
    if len(group) <= max(2, max_ranks):
        return "[" + ", ".join(map(str, group)) + "]"
    head = ", ".join(map(str, group[: max(1, max_ranks - 1)]))
    return f"[{head}, ..., {group[-1]}]"


def plan_rank_groups(plan: Plan, order: str = DEFAULT_ORDER) -> str:
    """The rank groups of every enabled training engine of ``plan``."""
    blocks: list[str] = []
    shown: dict[tuple[ModelAllocation, tuple[Slot, ...]], str] = {}
    for e in plan.engines.values():
        if e.allocation is None or e.allocation.is_inference:
            continue
        head = f"{e.name}: {e.allocation}, order {order}"
        same = shown.get((e.allocation, e.slots))
        if same is not None:
            blocks.append(f"{head}: the same groups as {same} (same layout on the same GPUs)")
            continue
        shown[(e.allocation, e.slots)] = e.name
        lines = [head, "  " + rank_placement(e)]
        text = format_rank_groups(group_kinds(e.allocation, order))
        lines += ["  " + line for line in text.splitlines()]
        blocks.append("\n".join(lines))
    if not blocks:
        return "rank groups: no training engine"
    return "rank groups (engine-local ranks)\n" + "\n".join(blocks)


def rank_placement(engine: EnginePlan, max_runs: int = 4) -> str:
    """Which GPUs the engine-local ranks run on: rank r on the engine's r-th slot."""
    where = f"on {engine.owner}'s GPUs: " if engine.colocated_with else ""
    runs: list[tuple[int, int, int, int, int]] = []  # first rank, last rank, node, gpu0, gpu1
    for rank, (node, gpu) in enumerate(engine.slots):
        if runs:
            r0, r1, n, g0, g1 = runs[-1]
            if n == node and g1 + 1 == gpu and r1 + 1 == rank:
                runs[-1] = (r0, rank, n, g0, gpu)
                continue
        runs.append((rank, rank, node, gpu, gpu))

    def text(run: tuple[int, int, int, int, int]) -> str:
        r0, r1, n, g0, g1 = run
        ranks = f"rank {r0}" if r0 == r1 else f"ranks {r0}-{r1}"
        gpus = f"GPU {g0}" if g0 == g1 else f"GPUs {g0}-{g1}"
        return f"{ranks} on node {n} {gpus}"

    if not runs:
        return "ranks: not placed"
    shown = [text(run) for run in runs[:max_runs]]
    if len(runs) > max_runs:
        shown.append(f"... ({len(runs) - max_runs} more runs, through {text(runs[-1])})")
    return where + "; ".join(shown)

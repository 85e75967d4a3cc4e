"""What ``python -m areal_conf explain`` prints, for a config or for backend strings.

- :func:`explain_config` composes a Hydra config (Hydra is imported here, lazily, so the
  core stays Hydra-free), validates it and returns the plan table and the GPU map, and on
  request the rank groups of every training engine.
- :func:`explain_specs` describes backend strings, optionally placed alone on a cluster
  (GPU map) and with their rank groups.

Every rejected input is an ``AllocationError`` (Hydra's composition errors are wrapped).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from areal_conf.allocation import ModelAllocation
from areal_conf.errors import AllocationError
from areal_conf.gpu_map import render_gpu_map
from areal_conf.mesh import DEFAULT_ORDER, format_rank_groups, rank_groups
from areal_conf.plan import EnginePlan, Plan, Slot, place


def compose_config(config: str | Path, overrides: Sequence[str] = ()) -> object:
    """Compose ``config`` (a YAML file, or a directory holding ``config.yaml``) with
    Hydra's compose API and the given overrides; returns the DictConfig."""
    path = Path(config)
    if path.is_dir():
        path = path / "config.yaml"
    if not path.is_file():
        raise AllocationError(
            f"config file {str(path)!r} not found",
            None,
            None,
            hint="give the primary config, e.g. --config conf/config.yaml",
        )
    if path.suffix not in (".yaml", ".yml"):
        raise AllocationError(
            f"config file {str(path)!r} is not a .yaml file",
            None,
            None,
            hint="give the primary config, e.g. --config conf/config.yaml",
        )

    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from areal_conf.hydra_compat import VERSION_BASE

    try:
        with initialize_config_dir(config_dir=str(path.resolve().parent), **VERSION_BASE):
            return compose(config_name=path.stem, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as err:
        detail = str(err).strip()
        cause = err.__cause__
        if cause is not None and str(cause).strip() and str(cause).strip() not in detail:
            detail += "\n" + str(cause).strip()
        raise AllocationError(
            f"cannot compose {path}: {detail}",
            None,
            None,
            hint="check the overrides: key=value to change a key, +key=value to add one; "
            "quote values with special characters, e.g. "
            "\"actor.backend='megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)'\"",
        ) from None


def explain_config(
    config: str | Path,
    overrides: Sequence[str] = (),
    *,
    groups: bool = False,
    order: str = DEFAULT_ORDER,
) -> str:
    """Plan table and GPU map of a composed config; with ``groups`` the rank groups."""
    from areal_conf.validate import validate

    plan = validate(compose_config(config, overrides))
    parts = [plan.table(), render_gpu_map(plan)]
    if not plan.memory_note:  # the table already says why there is no breakdown
        parts.append(memory_breakdown(plan))
    if groups:
        parts.append(plan_rank_groups(plan, order))
    return "\n\n".join(parts)


def memory_breakdown(plan: Plan) -> str:
    """Each engine's memory per GPU, term by term (GB = 10^9 bytes)."""
    from areal_conf.memory import GB

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
        total = sum(m.total for n in names if (m := plan.engines[n].memory) is not None)
        lines.append(
            f"  on {owner}'s GPUs: {' + '.join(names)} = {total / GB:.1f} GB if all stay "
            "resident (an offloaded training engine leaves while the others run)"
        )
    return "\n".join(lines)


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
        text = format_rank_groups(rank_groups(e.allocation, order))
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


def explain_specs(
    specs: Sequence[str],
    *,
    groups: bool = False,
    order: str = DEFAULT_ORDER,
    n_nodes: int | None = None,
    n_gpus_per_node: int | None = None,
) -> str:
    """Describe each backend string; with a cluster size, place it alone and draw the
    GPU map; with ``groups``, list its rank groups (training backends)."""
    from areal_conf.cli import describe
    from areal_conf.parser import parse_backend

    for flag, value in (("--nodes", n_nodes), ("--gpus-per-node", n_gpus_per_node)):
        if value is not None and value < 1:
            raise AllocationError(
                f"{flag} must be a positive whole number, got {value}",
                None,
                None,
                hint=f"e.g. {flag} {2 if flag == '--nodes' else 8}",
            )
    blocks = []
    for spec in specs:
        alloc = parse_backend(spec)
        lines = [describe(alloc)]
        if n_nodes is not None or n_gpus_per_node is not None:
            per_node = n_gpus_per_node or 8
            nodes = n_nodes or -(-alloc.world_size // per_node)
            lines += ["", render_gpu_map(place_alone(alloc, nodes, per_node))]
        if groups:
            lines.append("")
            if alloc.is_inference:
                lines.append(
                    f"rank groups: none ({alloc.backend} runs {alloc.num_instances} "
                    f"independent server instance(s) of {alloc.instance_size} GPU(s))"
                )
            else:
                lines.append(f"rank groups (order {order})")
                text = format_rank_groups(rank_groups(alloc, order))
                lines += ["  " + line for line in text.splitlines()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def place_alone(alloc: ModelAllocation, n_nodes: int, n_gpus_per_node: int) -> Plan:
    """A plan holding one engine (named after its backend) placed alone on a cluster."""
    available = n_nodes * n_gpus_per_node
    if alloc.world_size > available:
        nodes = -(-alloc.world_size // n_gpus_per_node)
        raise AllocationError(
            f"{alloc} needs {alloc.world_size} GPUs but {n_nodes} node"
            f"{'s' if n_nodes != 1 else ''} × {n_gpus_per_node} GPUs have {available}",
            str(alloc),
            None,
            hint=f"use --nodes {nodes} or more",
        )
    name = alloc.backend
    slots = place([(name, alloc)], n_nodes, n_gpus_per_node)[name]
    engine = EnginePlan(name, alloc, str(alloc), slots=slots)
    return Plan({name: engine}, n_nodes, n_gpus_per_node)

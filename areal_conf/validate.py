"""``validate(cfg)``: the one check that train.py and the launcher run (SPEC §5–§7).

Takes a composed config (an OmegaConf DictConfig or any nested mapping) and returns a
``Plan`` or raises one ``AllocationError`` whose first line names the config key.
Only ``backend``, ``scheduling_strategy``, ``cluster``, ``model`` and
``allocation_mode`` are read, never the ``allocation`` nodes the resolvers expand.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from areal_conf.allocation import ModelAllocation
from areal_conf.backends import ENGINES, INFERENCE_BACKENDS, TRAINING_BACKENDS, join_or
from areal_conf.errors import AllocationError
from areal_conf.parser import parse_backend
from areal_conf.plan import EnginePlan, Plan, place

# SPEC §1: what an empty backend means, and the default scheduling of each engine.
INHERITS_ACTOR = ("critic", "ref")
OPTIONAL = ("teacher",)
SCHEDULING_TYPES = ("separation", "colocation")
DEFAULT_SCHEDULING = {"critic": ("colocation", "actor"), "ref": ("colocation", "actor")}


def validate(cfg: Any) -> Plan:
    """Check a composed config and return its allocation plan."""
    check_allocation_mode(cfg.get("allocation_mode", ""))
    n_nodes, n_gpus_per_node = _cluster(cfg.get("cluster") or {})
    engines = {name: _engine(name, cfg) for name in ENGINES}
    _check_colocation(cfg, engines)
    _check_capacity(engines, n_nodes, n_gpus_per_node)
    model = _model_section(cfg)
    if model:
        _check_model(engines, model)
    # -- memory (issue 14): every engine's per-GPU need against cluster.gpu_memory_gb
    from areal_conf.fit import check_memory

    memory = check_memory(cfg, engines, model, n_nodes, n_gpus_per_node)
    # --
    separated = [
        (name, e.allocation)
        for name, e in engines.items()
        if e.allocation is not None and not e.colocated_with
    ]
    slots = place(separated, n_nodes, n_gpus_per_node)
    placed = {}
    for name, e in engines.items():
        owner = e.colocated_with or name
        placed[name] = replace(e, slots=slots.get(owner, ()), memory=memory.estimates.get(name))
    return Plan(placed, n_nodes, n_gpus_per_node, memory.warnings, memory_note=memory.note)


def check_allocation_mode(value: object) -> None:
    """Reject the deprecated top-level allocation_mode, quoting its translation (SPEC §6)."""
    if value is None or value == "":
        return
    if not isinstance(value, str):
        raise AllocationError(
            "allocation_mode: the deprecated allocation_mode is set",
            value,
            None,
            hint="remove it and set each engine's backend, e.g. "
            "rollout.backend=sglang:d4t2 actor.backend=fsdp:d8",
        )
    from areal_conf.legacy import migrate_allocation_mode
    from areal_conf.overrides import format_overrides

    try:
        translation = format_overrides(migrate_allocation_mode(value))
    except AllocationError as err:
        raise AllocationError(
            "allocation_mode is deprecated, and this value cannot be translated: " + err.reason,
            value,
            err.position,
            length=err.length,
            hint="set each engine's backend instead, e.g. "
            "rollout.backend=sglang:d4t2 actor.backend=fsdp:d8",
        ) from None
    raise AllocationError(
        "allocation_mode is deprecated: each engine has its own backend field now",
        value,
        None,
        hint=f"remove allocation_mode and use these overrides instead: {translation}  "
        f"(or run: python -m areal_conf migrate --yaml '{value}' for the YAML)",
    )


def _engine(name: str, cfg: Any) -> EnginePlan:
    node = cfg.get(name)
    key = f"{name}.backend"
    written = "" if node is None else node.get("backend", "")
    if written is None:
        written = ""
    inherited_from = None
    if written == "":
        if name in INHERITS_ACTOR:
            actor = cfg.get("actor")
            written = "" if actor is None else (actor.get("backend") or "")
            inherited_from = "actor"
        elif name in OPTIONAL:
            return EnginePlan(name, None, "")
        if written == "":
            example = "sglang:d2t4" if name == "rollout" else "fsdp:d8"
            raise AllocationError(
                f"{key}: {name} needs a backend and none is set",
                "",
                None,
                hint=f"set one, e.g. {key}={example}",
            )
    try:
        alloc = parse_backend(written)
    except AllocationError as err:
        where = "actor.backend (inherited by an empty " + key + ")" if inherited_from else key
        raise err.with_context(where) from None
    _check_kind(name, key, alloc, written)
    strategy = (node or {}).get("scheduling_strategy") or {}
    # SPEC §1's defaults, for configs composed without the areal_schema dataclasses.
    default_kind, default_target = DEFAULT_SCHEDULING.get(name, ("separation", None))
    kind = strategy.get("type") or default_kind
    if kind not in SCHEDULING_TYPES:
        raise AllocationError(
            f"{name}.scheduling_strategy.type: unknown scheduling type {kind!r}",
            kind,
            None,
            hint=f"use {' or '.join(SCHEDULING_TYPES)}",
        )
    colocated_with = None
    if kind == "colocation":
        colocated_with = strategy.get("target") or default_target or ""
    return EnginePlan(
        name, alloc, "" if inherited_from else written, inherited_from, colocated_with
    )


def _check_kind(name: str, key: str, alloc: ModelAllocation, written: str) -> None:
    wants_inference = name == "rollout"
    if alloc.is_inference == wants_inference:
        return
    if wants_inference:
        hint = f"use {join_or(list(INFERENCE_BACKENDS))}, e.g. {key}=sglang:{alloc.parallel.body()}"
        what = "an inference backend"
    else:
        hint = f"use {join_or(list(TRAINING_BACKENDS))}, e.g. {key}=fsdp:d{alloc.world_size}"
        what = "a training backend"
    raise AllocationError(
        f"{key}: {name} needs {what}, got {alloc.backend}",
        written,
        0,
        length=len(alloc.backend),
        hint=hint,
    )


def _check_colocation(cfg: Any, engines: dict[str, EnginePlan]) -> None:
    for name, e in engines.items():
        target = e.colocated_with
        if target is None or e.allocation is None:
            continue
        key = f"{name}.scheduling_strategy.target"
        enabled = [n for n, other in engines.items() if other.enabled and n != name]
        if target not in engines or target == name:
            reason = (
                f"{name} cannot be colocated with itself"
                if target == name
                else f"{name} is colocated with {target!r}, which is no engine"
                if target
                else f"{name} is colocated but names no target"
            )
            raise AllocationError(
                f"{key}: {reason}",
                target,
                None,
                hint=f"set {key} to one of {', '.join(enabled)}, or "
                f"{name}.scheduling_strategy.type=separation",
            )
        other = engines[target]
        if other.allocation is None:
            raise AllocationError(
                f"{key}: {name} is colocated with {target}, which is disabled (no backend)",
                target,
                None,
                hint=f"set {target}.backend, or {name}.scheduling_strategy.type=separation",
            )
        if other.colocated_with:
            raise AllocationError(
                f"{key}: {name} is colocated with {target}, which is itself colocated with "
                f"{other.colocated_with}",
                target,
                None,
                hint=f"point {key} at {other.colocated_with}",
            )
        if other.gpus != e.gpus:
            raise AllocationError(
                f"{name}.backend: {name} is colocated with {target} but needs {e.gpus} GPUs "
                f"and {target} has {other.gpus}",
                str(e.allocation),
                None,
                hint=f"colocated engines share GPUs, so give {name} a layout of {other.gpus} GPUs "
                f"(e.g. {name}.backend={e.allocation.backend}:d{other.gpus}) or set "
                f"{name}.scheduling_strategy.type=separation",
            )


def _check_capacity(engines: dict[str, EnginePlan], n_nodes: int, per_node: int) -> None:
    separated = [e for e in engines.values() if e.enabled and not e.colocated_with]
    needed = sum(e.gpus for e in separated)
    available = n_nodes * per_node
    if needed <= available:
        return
    parts = " + ".join(f"{e.name} {e.gpus}" for e in separated)
    nodes_needed = -(-needed // per_node)
    raise AllocationError(
        f"cluster: the engines need {needed} GPUs ({parts}) but the cluster has {available} "
        f"({n_nodes} node{'s' if n_nodes != 1 else ''} × {per_node} GPUs)",
        None,
        None,
        hint=f"add nodes (cluster.n_nodes={nodes_needed}) or shrink an engine's layout",
    )


def _model_section(cfg: Any) -> dict[str, Any]:
    """The model section, its blanks filled from model.hf_config or a local actor.path."""
    from areal_conf.model_checks import validate_model
    from areal_conf.model_shape import check_shape_values, merge_model

    model = cfg.get("model") or {}
    section = {k: model.get(k) for k in model}
    validate_model(section)  # unknown keys, and the layout rules' values
    check_shape_values(section)
    actor = cfg.get("actor")
    # keys() first: get() of a key a structured config lacks is slow (it builds an error)
    path = actor.get("path") if actor is not None and "path" in actor.keys() else None  # noqa: SIM118
    return merge_model(section, path)


def _check_model(engines: dict[str, EnginePlan], model: Any) -> None:
    from areal_conf.model_checks import MODEL_KEYS, check_model

    section = {k: model.get(k) for k in MODEL_KEYS}
    for name, e in engines.items():
        if e.allocation is not None:
            check_model(name, e.allocation, section)


def _cluster(cluster: Any) -> tuple[int, int]:
    values = []
    for field_name, default in (("n_nodes", 1), ("n_gpus_per_node", 8)):
        value = cluster.get(field_name, default)
        if type(value) is not int or value < 1:
            raise AllocationError(
                f"cluster.{field_name}: must be a positive whole number, got {value!r}",
                value,
                None,
                hint=f"e.g. cluster.{field_name}={default}",
            )
        values.append(value)
    return values[0], values[1]

"""``validate(cfg)``: the one check that train.py and the launcher run.

Takes a composed config (an OmegaConf DictConfig or any nested mapping) and returns a
``Plan`` or raises one ``AllocationError`` whose first line names the config key.
The engines and their scheduling come from :mod:`areal_conf.engines`; besides them only
``cluster``, ``model`` and ``allocation_mode`` are read, never the ``allocation`` nodes
the resolvers expand, nor keys that only the application reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from areal_conf.engines import read_engines, read_value, resolve_colocation
from areal_conf.errors import AllocationError
from areal_conf.fit import check_memory
from areal_conf.plan import EnginePlan, Plan, place, placement_warnings


def validate(cfg: Any) -> Plan:
    """Check a composed config and return its allocation plan."""
    if not isinstance(cfg, Mapping):
        raise AllocationError(
            f"the config must be a mapping of sections, got {type(cfg).__name__}",
            cfg,
            None,
            hint="pass the composed config itself, e.g. validate(cfg) inside @hydra.main",
        )
    check_allocation_mode(read_value(cfg, "allocation_mode", "allocation_mode", ""))
    n_nodes, n_gpus_per_node = _cluster(read_value(cfg, "cluster", "cluster") or {})
    engines = resolve_colocation(read_engines(cfg))
    if n_gpus_per_node:
        _check_capacity(engines, n_nodes, n_gpus_per_node)
    model = _model_section(cfg)
    if model:
        _check_model(engines, model)
    if not n_gpus_per_node:
        # A CPU run: processes only, nothing to place and no GPU memory to check.
        return Plan(engines, n_nodes, n_gpus_per_node)
    memory = check_memory(cfg, engines, model, n_nodes, n_gpus_per_node)
    separated = [
        (name, e.allocation)
        for name, e in engines.items()
        if e.allocation is not None and not e.colocated_with
    ]
    slots = place(separated, n_nodes, n_gpus_per_node)
    placed = {
        name: replace(e, slots=slots.get(e.owner, ()), memory=memory.estimates.get(name))
        if e.enabled
        else e
        for name, e in engines.items()
    }
    warnings = placement_warnings(separated, n_gpus_per_node) + memory.warnings
    return Plan(placed, n_nodes, n_gpus_per_node, warnings, memory_note=memory.note)


def check_allocation_mode(value: object) -> None:
    """Reject the deprecated top-level allocation_mode, quoting its translation."""
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
    from areal_conf.overrides import shell_line

    try:
        translation = shell_line(migrate_allocation_mode(value))
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

    model = read_value(cfg, "model", "model") or {}
    section = {k: read_value(model, k, f"model.{k}") for k in model}
    validate_model(section)  # unknown keys, and the layout rules' values
    check_shape_values(section)
    actor = read_value(cfg, "actor", "actor")
    path = read_value(actor, "path", "actor.path") if actor is not None else None
    return merge_model(section, path)


def _check_model(engines: dict[str, EnginePlan], model: Any) -> None:
    from areal_conf.model_checks import MODEL_KEYS, check_model

    section = {k: model.get(k) for k in MODEL_KEYS}
    for name, e in engines.items():
        if e.allocation is not None:
            check_model(name, e.allocation, section)


def _cluster(cluster: Any) -> tuple[int, int]:
    if not isinstance(cluster, Mapping):
        raise AllocationError(
            f"cluster: must be a section, got {type(cluster).__name__}",
            cluster,
            None,
            hint="e.g. cluster: {n_nodes: 1, n_gpus_per_node: 8}",
        )
    values = []
    # n_gpus_per_node 0 is AReaL's CPU template.
    for field_name, default, least in (("n_nodes", 1, 1), ("n_gpus_per_node", 8, 0)):
        value = read_value(cluster, field_name, f"cluster.{field_name}", default)
        if type(value) is not int or value < least:
            what = "a positive whole number" if least else "a whole number, 0 for a CPU run"
            raise AllocationError(
                f"cluster.{field_name}: must be {what}, got {value!r}",
                value,
                None,
                hint=f"e.g. cluster.{field_name}={default}",
            )
        values.append(value)
    return values[0], values[1]

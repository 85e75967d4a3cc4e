"""What the ``areal.`` OmegaConf resolvers compute.

``${areal.allocation:}`` in an engine node expands that engine's backend (critic and ref
inherit an empty backend from ``actor.backend``) to ``{spec, backend, dp, tp, pp, cp, ep,
etp, edp, world_size}``, or null for a disabled teacher; ``${areal.world_size:<spec>}``
and ``${areal.alloc:<spec>}`` work in any YAML value.

The installed plugin (``hydra_plugins.areal_conf_plugin.areal_configs``) registers them
in every Hydra app when Hydra discovers plugins, and imports this module when a resolver
first runs, so that discovery never pays for the parser.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from areal_conf.parser import parse_backend
from areal_conf.validate import INHERITS_ACTOR, OPTIONAL


def engine_allocation(parent: DictConfig, root: DictConfig) -> DictConfig | None:
    """``${areal.allocation:}`` in the engine node ``parent`` of the config ``root``."""
    name = str(parent._key())
    spec = parent.get("backend") or ""
    if spec == "" and name in INHERITS_ACTOR:
        spec = root.get("actor", {}).get("backend") or ""
    if spec == "" and name in OPTIONAL:
        return None
    # A plain dict breaks OmegaConf.resolve on 2.3; a DictConfig node does not.
    return OmegaConf.create(parse_backend(spec).to_dict())


def alloc(spec: Any) -> DictConfig:
    """``${areal.alloc:<spec>}``: the whole expansion of a backend string."""
    return OmegaConf.create(parse_backend(spec).to_dict())


def world_size(spec: Any) -> int:
    """``${areal.world_size:<spec>}``."""
    return parse_backend(spec).world_size

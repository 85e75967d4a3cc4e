"""OmegaConf resolvers in the ``areal.`` namespace (SPEC §5).

``${areal.allocation:}`` in an engine node expands that engine's backend (with SPEC §1's
fallback) to ``{spec, backend, dp, tp, pp, cp, ep, etp, edp, world_size}``, or null for a
disabled teacher; ``${areal.world_size:<spec>}`` works in any YAML value. Registration
uses ``replace=True`` because Hydra re-runs plugin modules at every start.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from areal_conf.parser import parse_backend
from areal_conf.validate import INHERITS_ACTOR, OPTIONAL


def _engine_allocation(*, _parent_: DictConfig, _root_: DictConfig) -> DictConfig | None:
    name = str(_parent_._key())
    spec = _parent_.get("backend") or ""
    if spec == "" and name in INHERITS_ACTOR:
        spec = _root_.get("actor", {}).get("backend") or ""
    if spec == "" and name in OPTIONAL:
        return None
    # A plain dict breaks OmegaConf.resolve on 2.3; a DictConfig node does not.
    return OmegaConf.create(parse_backend(spec).to_dict())


def _spec(spec: Any) -> DictConfig:
    return OmegaConf.create(parse_backend(spec).to_dict())


def _world_size(spec: Any) -> int:
    return parse_backend(spec).world_size


def register_resolvers() -> None:
    """Register every ``areal.`` resolver; safe to call any number of times."""
    OmegaConf.register_new_resolver("areal.allocation", _engine_allocation, replace=True)
    OmegaConf.register_new_resolver("areal.alloc", _spec, replace=True)
    OmegaConf.register_new_resolver("areal.world_size", _world_size, replace=True)

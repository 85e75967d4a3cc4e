"""OmegaConf resolvers in the ``areal.`` namespace.

``allocation: ${areal.allocation:}`` in an engine section expands that engine's backend
(an empty critic/ref backend is ``actor.backend``) to
``{spec, backend, dp, tp, pp, cp, ep, etp, edp, world_size}``, or null for an engine that
is not built (an empty teacher backend, a ref with ``actor.kl_ctl <= 0``);
``${areal.world_size:<spec>}`` works in any YAML value. The engine rules are
:mod:`areal_conf.engines`'s. Registration uses ``replace=True`` because Hydra re-runs
plugin modules at every start.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from areal_conf.engines import KL_ROLE, engine_backend, kl_reason
from areal_conf.errors import AllocationError
from areal_conf.parser import parse_backend


def _engine_allocation(*, _parent_: DictConfig, _root_: DictConfig) -> DictConfig | None:
    name = str(_parent_._key())
    if name == KL_ROLE and kl_reason(_root_) is not None:
        return None
    spec, where = engine_backend(_root_, name)
    if spec is None:
        return None
    try:
        alloc = parse_backend(spec)
    except AllocationError as err:
        raise err.with_context(where) from None
    # A plain dict breaks OmegaConf.resolve on 2.3; a DictConfig node does not.
    return OmegaConf.create(alloc.to_dict())


def _spec(spec: Any) -> DictConfig:
    return OmegaConf.create(parse_backend(spec).to_dict())


def _world_size(spec: Any) -> int:
    return parse_backend(spec).world_size


def register_resolvers() -> None:
    """Register every ``areal.`` resolver; safe to call any number of times."""
    OmegaConf.register_new_resolver("areal.allocation", _engine_allocation, replace=True)
    OmegaConf.register_new_resolver("areal.alloc", _spec, replace=True)
    OmegaConf.register_new_resolver("areal.world_size", _world_size, replace=True)

"""OmegaConf resolvers in the ``areal.`` namespace.

``${areal.allocation:}`` in an engine node expands that engine's backend (critic and ref
inherit an empty backend from ``actor.backend``) to ``{spec, backend, dp, tp, pp, cp, ep,
etp, edp, world_size}``, or null for a disabled teacher; ``${areal.world_size:<spec>}``
and ``${areal.alloc:<spec>}`` work in any YAML value.

Every Hydra app in the environment imports this module when it discovers the areal-conf
plugins (``hydra_plugins.areal_conf_plugin.areal_configs``) and registers the resolvers:
registering is cheap, the parser is imported when a resolver first runs. Registration
replaces, so it can run any number of times.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

# omegaconf 2.4.0 and later deprecate register_new_resolver for register_resolver(...,
# replace=); before 2.4.0, register_resolver is the legacy API with other semantics.
_REGISTER_HAS_REPLACE = "replace" in inspect.signature(OmegaConf.register_resolver).parameters


def _engine_allocation(*, _parent_: DictConfig, _root_: DictConfig) -> DictConfig | None:
    from areal_conf.parser import parse_backend
    from areal_conf.validate import INHERITS_ACTOR, OPTIONAL

    name = str(_parent_._key())
    spec = _parent_.get("backend") or ""
    if spec == "" and name in INHERITS_ACTOR:
        spec = _root_.get("actor", {}).get("backend") or ""
    if spec == "" and name in OPTIONAL:
        return None
    # A plain dict breaks OmegaConf.resolve on 2.3; a DictConfig node does not.
    return OmegaConf.create(parse_backend(spec).to_dict())


def _spec(spec: Any) -> DictConfig:
    from areal_conf.parser import parse_backend

    return OmegaConf.create(parse_backend(spec).to_dict())


def _world_size(spec: Any) -> int:
    from areal_conf.parser import parse_backend

    return parse_backend(spec).world_size


def _register(name: str, resolver: Callable[..., Any]) -> None:
    if _REGISTER_HAS_REPLACE:
        # omegaconf < 2.4's stubs know only the legacy signature
        OmegaConf.register_resolver(name, resolver, replace=True)  # type: ignore[call-arg,unused-ignore]
    else:
        OmegaConf.register_new_resolver(name, resolver, replace=True)


def register_resolvers() -> None:
    """Register every ``areal.`` resolver; safe to call any number of times."""
    _register("areal.allocation", _engine_allocation)
    _register("areal.alloc", _spec)
    _register("areal.world_size", _world_size)

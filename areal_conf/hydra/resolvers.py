"""What the ``areal.`` OmegaConf resolvers compute.

``allocation: ${areal.allocation:}`` in an engine section expands that engine's backend
(an empty critic/ref backend is ``actor.backend``) to
``{spec, backend, dp, tp, pp, cp, ep, etp, edp, world_size}``, or null for an engine that
is not built (an empty teacher backend, a ref with ``actor.kl_ctl <= 0``);
``${areal.world_size:<spec>}`` and ``${areal.alloc:<spec>}`` work in any YAML value. The
engine rules are :mod:`areal_conf.rules.engines`'s.

The installed plugin (``hydra_plugins.areal_conf_plugin.areal_configs``) registers them
in every Hydra app when Hydra discovers plugins, and imports this module when a resolver
first runs, so that discovery never pays for the parser.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from areal_conf.areal.roles import TEACHER_LAYOUTS
from areal_conf.areal.versions import choose_rules
from areal_conf.config.reading import read_config
from areal_conf.rules.engines import engine_allocation as allocation_of
from areal_conf.spec.parser import parse_backend


def engine_allocation(parent: DictConfig, root: DictConfig) -> DictConfig | None:
    """``${areal.allocation:}`` in the engine node ``parent``.

    The engine's siblings (``actor`` for an empty critic backend, ``actor.kl_ctl`` for
    ref) are read from the section that holds the engine, not from ``root``: an AReaL
    config mounted under a key (``- areal_schema@areal``) resolves like one at the top.
    A 2.0 teacher's node is ``teacher.rollout`` or ``teacher.train``.
    """
    name = str(parent._key())
    section = parent._get_parent()
    if name in TEACHER_LAYOUTS and isinstance(section, DictConfig) and section._key() == "teacher":
        name, section = "teacher", section._get_parent()
    config = section if isinstance(section, DictConfig) else root
    rules = choose_rules().rules
    allocation = allocation_of(read_config(config, rules), name)
    if allocation is None:
        return None
    # A plain dict breaks OmegaConf.resolve on 2.3; a DictConfig node does not.
    return OmegaConf.create(allocation.to_dict())


def alloc(spec: Any) -> DictConfig:
    """``${areal.alloc:<spec>}``: the whole expansion of a backend string."""
    return OmegaConf.create(parse_backend(spec).to_dict())


def world_size(spec: Any) -> int:
    """``${areal.world_size:<spec>}``: the GPUs a backend string takes."""
    return parse_backend(spec).world_size

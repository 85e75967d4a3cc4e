"""Registration on discovery: what an installed areal-conf gives every Hydra app.

Hydra imports this module when it discovers plugins (the ``hydra_plugins`` namespace
scan, and on Hydra 1.4 also the ``hydra.plugins`` entry points), in every application of
the environment. So that nothing has to import ``areal_conf`` first:

* importing it registers the ``areal.`` resolvers; each imports ``areal_conf.hydra.resolvers``
  (and the parser) when it first runs;
* ``AReaLSearchPathPlugin`` adds ``areal-conf://`` to every application's config search
  path, and ``AReaLConfigSource`` serves the configs below from it, each built from its
  dataclass (``OmegaConf.structured``) the first time an application loads it. An
  application that never asks for ``areal_schema`` never pays for building it.

This module stays as small as the launcher's and the sweeper's: every Hydra app pays for
importing it.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import is_dataclass
from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

PROVIDER = "areal_conf"
SCHEME = "areal-conf"


_CONFIGS_MODULE = "hydra_plugins.areal_conf_plugin._configs"


@functools.cache
def configs() -> dict[str, str]:
    """Config path (group/name, as in a defaults list) -> "module:name" it is built from: a
    dataclass (or an instance of one), or a function that returns the config. Built when
    first asked for, not at discovery: the short launcher names come from the core."""
    from areal_conf.hydra_names import INNER_ALIASES

    return {
        "areal_schema": "areal_conf.hydra.structured:schema_node",
        "areal_engine": "areal_conf.hydra.structured:engine_node",
        "hydra/launcher/areal": f"{_CONFIGS_MODULE}:AReaLLauncherConf",
        **{
            f"hydra/launcher/areal_{inner}": f"{_CONFIGS_MODULE}:AREAL_{inner.upper()}"
            for inner in INNER_ALIASES
        },
        "hydra/sweeper/areal_layouts": f"{_CONFIGS_MODULE}:AReaLLayoutsSweeperConf",
    }


def _allocation(*, _parent_: Any, _root_: Any) -> Any:
    from areal_conf.hydra.plugin_api import engine_allocation

    return engine_allocation(_parent_, _root_)


def _alloc(spec: Any) -> Any:
    from areal_conf.hydra.plugin_api import alloc

    return alloc(spec)


def _world_size(spec: Any) -> Any:
    from areal_conf.hydra.plugin_api import world_size

    return world_size(spec)


#: The ``areal.`` resolvers. Registered at discovery, so they are thin: the work (and the
#: parser's import) waits in ``areal_conf.hydra.resolvers`` until a config uses one.
RESOLVERS: dict[str, Callable[..., Any]] = {
    "areal.allocation": _allocation,
    "areal.alloc": _alloc,
    "areal.world_size": _world_size,
}

# omegaconf 2.4.0 and later deprecate register_new_resolver for register_resolver(...,
# replace=); before 2.4.0, register_resolver is the legacy API with other semantics.
_REGISTER_HAS_REPLACE = "replace" in inspect.signature(OmegaConf.register_resolver).parameters


def register_resolvers() -> None:
    """Register (replace) every ``areal.`` resolver, without a deprecation warning on any
    supported omegaconf; safe to call any number of times."""
    for name, resolver in RESOLVERS.items():
        if _REGISTER_HAS_REPLACE:
            # these thin resolvers annotate Any: nothing for omegaconf 2.4 to validate
            OmegaConf.register_resolver(  # type: ignore[call-arg,unused-ignore]
                name, resolver, replace=True, annotation_validation="off"
            )
        else:
            OmegaConf.register_new_resolver(name, resolver, replace=True)


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


@functools.cache
def _groups() -> frozenset[str]:
    groups = {""}
    for path in configs():
        while path:
            path = _parent(path)
            groups.add(path)
    return frozenset(groups)


# Configs built from a dataclass, per process; every load returns a copy (as Hydra's
# ConfigStore does). A function is called at every load: the schema's shape follows the
# AReaL version in use, and the function keeps what it built.
_built: dict[str, Any] = {}


def _normalize(config_path: str) -> str:
    path = config_path.strip("/")
    return path.removesuffix(".yaml")


def build(path: str) -> Any:
    """The config at ``path`` (one of ``configs()``): a dataclass is built on the first call."""
    if path not in _built:
        module, _, name = configs()[path].partition(":")
        source = getattr(importlib.import_module(module), name)
        if not is_dataclass(source):
            return source()
        _built[path] = OmegaConf.structured(source)
    return copy.deepcopy(_built[path])


class AReaLConfigSource(ConfigSource):
    """``areal-conf://``: ``areal_schema``, ``areal_engine``, ``hydra/launcher/areal`` and
    ``hydra/sweeper/areal_layouts``, each built when first loaded."""

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def load_config(self, config_path: str) -> ConfigResult:
        path = _normalize(config_path)
        if path not in configs():
            raise ConfigLoadError(f"areal-conf provides no config {config_path}")
        return ConfigResult(
            provider=PROVIDER,
            path=f"{SCHEME}://{self.path}",
            config=build(path),
            header={"package": None},
        )

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        return _normalize(config_path) in _groups()

    def is_config(self, config_path: str) -> bool:
        return _normalize(config_path) in configs()

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        group = _normalize(config_path)
        found: set[str] = set()
        if results_filter in (None, ObjectType.GROUP):
            found |= {g.rpartition("/")[2] for g in _groups() if g and _parent(g) == group}
        if results_filter in (None, ObjectType.CONFIG):
            found |= {c.rpartition("/")[2] for c in configs() if _parent(c) == group}
        return sorted(found)


class AReaLSearchPathPlugin(SearchPathPlugin):
    """Adds ``areal-conf://`` to every application's config search path."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        # Hydra 1.4 imports this module once per process; a test harness that restores
        # Hydra's and OmegaConf's global state in between drops the resolvers, so each new
        # search path (every application start, every initialize()) registers them again.
        register_resolvers()
        search_path.append(provider=PROVIDER, path=f"{SCHEME}://")


register_resolvers()

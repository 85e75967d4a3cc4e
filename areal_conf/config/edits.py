"""A composed config with overrides applied, as Hydra's ``++`` applies them.

:func:`with_overrides` edits a copy of a config (an OmegaConf DictConfig, or a view of any
mapping), for a fix's check and for a sweep's layouts. :func:`edited_run` makes the
commonest edit, another backend for an engine, on the config as read instead, when no
value read depends on it: a sweep of a hundred layouts then reads the config once.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from areal_conf.config.nodes import is_null
from areal_conf.config.run_config import RunConfig
from areal_conf.overrides import hydra_unquoted


def edited_run(run: RunConfig, overrides: Sequence[str]) -> RunConfig | None:
    """``run`` as :func:`areal_conf.config.reading.read_config` would read the config with
    ``overrides`` applied, when each one sets an engine's ``backend`` that the config has
    and no value read was an interpolation that could name a backend; None otherwise (read
    the edited config again). The teacher is left to a new read: its backend is read
    into two objects."""
    if any("backend" in written for written in run.interpolations.values()):
        return None
    by_key = {e.backend_key: e for e in run.engines.values() if e.name != "teacher"}
    engines = dict(run.engines)
    for item in overrides:
        key, equals, text = item.partition("=")
        engine = by_key.get(key)
        value = plain_value(text)
        if not equals or engine is None or key not in run.present_keys:
            return None
        if not isinstance(value, str):
            return None
        engines[engine.name] = replace(engines[engine.name], backend=value)
    return replace(run, engines=engines)


#: Values Hydra's override grammar reads as a whole number, or as a float.
_INTEGER: Final = re.compile(r"[+-]?\d+")
_NUMBER: Final = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def with_overrides(cfg: Any, overrides: Sequence[str]) -> Any:
    """``cfg`` with the overrides ``key=value`` (or ``++key=value``) applied as Hydra's
    ``++`` applies them: the key set, or added where it is absent. A value is read as
    Hydra reads a plain one (``true``, ``false``, ``null``, a number, else text). An
    OmegaConf config is copied whole (with the config it is a section of), so that its
    interpolations of a changed key follow the new value; another mapping is seen through
    a view with the keys set. ``cfg`` itself is not changed."""
    omegaconf = callable(getattr(cfg, "_set_flag", None))
    root = _omegaconf_copy(cfg) if omegaconf else cfg
    for item in overrides:
        if item.startswith("~"):  # Hydra's deletion of a key
            root = _deleted(root, item[1:].partition("=")[0].split("."), omegaconf)
            continue
        key, _, text = item.partition("=")
        parts = key.lstrip("+").split(".")
        value = plain_value(text)
        if omegaconf:
            _set_in_node(root, parts, value)
        else:
            root = _set_in_copy(root, parts, value)
    return root


def _deleted(root: Any, parts: list[str], omegaconf: bool) -> Any:
    """``root`` without the key at ``parts`` (as it is when there is no such key)."""
    parent: Any = root
    for part in parts[:-1]:
        parent = parent.get(part) if isinstance(parent, Mapping) else None
    if not isinstance(parent, Mapping) or parts[-1] not in parent.keys():  # noqa: SIM118
        return root
    if omegaconf:
        section: Any = parent  # an OmegaConf DictConfig
        section._set_flag("struct", False)
        del section[parts[-1]]
        return root
    return _set_in_copy(root, parts, _DELETED)


def _omegaconf_copy(node: Any) -> Any:
    """A copy of an OmegaConf config node with the whole config it belongs to (a section
    such as ``cfg.areal`` too), so that interpolations from the top (``${areal.actor.x}``)
    read the copy."""
    top = node._get_root()
    if top is node:
        return copy.deepcopy(node)
    found = copy.deepcopy(top)
    for part in node._get_full_key(None).split("."):
        found = found._get_node(part)
    return found


def plain_value(text: str) -> Any:
    """An override's value as Hydra reads a plain one: ``true``, ``false``, ``null``, a
    whole number, a float, a quoted string without its quotes, else the text."""
    unquoted = hydra_unquoted(text)
    if unquoted is not None:
        return unquoted
    words = {"true": True, "false": False, "null": None}
    if text.lower() in words:
        return words[text.lower()]
    if _INTEGER.fullmatch(text):
        return int(text)
    if _NUMBER.fullmatch(text):
        return float(text)
    return text


def _set_in_copy(node: Any, parts: list[str], value: Any) -> Mapping[str, Any]:
    """``node`` (a mapping, or None) with ``parts`` set to ``value``, as a view."""
    base = node if isinstance(node, Mapping) else None
    if len(parts) == 1:
        return _Overlay(base, {parts[0]: value})
    child = base.get(parts[0]) if base is not None and parts[0] in base.keys() else None  # noqa: SIM118
    return _Overlay(base, {parts[0]: _set_in_copy(child, parts[1:], value)})


#: A key an override deletes (``~key``), in an :class:`_Overlay`'s changes.
_DELETED: Final = object()


class _Overlay(Mapping[str, Any]):
    """A read-only view of a mapping with some keys set or deleted: what is not changed
    is read from the mapping when asked for (an interpolation only the application
    resolves is left alone, as :mod:`areal_conf.config.reading` leaves it)."""

    def __init__(self, base: Mapping[str, Any] | None, changes: Mapping[str, Any]) -> None:
        self._base = base
        self._changes = dict(changes)

    def __getitem__(self, key: str) -> Any:
        if key in self._changes:
            if self._changes[key] is _DELETED:
                raise KeyError(key)
            return self._changes[key]
        if self._base is None or key not in self._base.keys():  # noqa: SIM118
            raise KeyError(key)
        return self._base[key]

    def __iter__(self) -> Iterator[str]:
        keys = [str(k) for k in self._base.keys()] if self._base is not None else []  # noqa: SIM118
        changed = [k for k in self._changes if k not in keys]
        return iter(k for k in [*keys, *changed] if self._changes.get(k) is not _DELETED)

    def __len__(self) -> int:
        return len(list(iter(self)))


def _set_in_node(node: Any, parts: list[str], value: Any) -> None:
    """Set a key in an OmegaConf node as ``OmegaConf.update(..., force_add=True)`` does:
    each node on the way opened for new keys, a missing or null section created."""
    for depth, part in enumerate(parts[:-1]):
        node._set_flag("struct", False)
        if _is_index(node, part):  # a list's item: ``scheduling_spec.0.gpu``
            node = node[int(part)]
            continue
        child = node.get(part) if part in node.keys() else None  # noqa: SIM118
        if _is_index(child, parts[depth + 1]):
            node = child
            continue
        if not isinstance(child, Mapping) or is_null(child):
            node[part] = {}
            child = node[part]
        node = child
    node._set_flag("struct", False)
    node[int(parts[-1]) if _is_index(node, parts[-1]) else parts[-1]] = value


def _is_index(node: Any, part: str) -> bool:
    """Whether ``part`` is an index of ``node``, a list, as Hydra reads ``key.0``."""
    return (
        isinstance(node, Sequence)
        and not isinstance(node, str)
        and part.isdigit()
        and int(part) < len(node)
    )

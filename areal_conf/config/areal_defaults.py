"""AReaL's defaults for the keys a config's interpolations name and the config leaves out.

AReaL's loader merges the composed YAML onto its config dataclasses before anything is
resolved (``to_structured_cfg``: ``OmegaConf.merge(OmegaConf.structured(config_cls),
cfg)``, areal/api/cli_args.py:3534-3541 at AReaL cbff54d64), so an interpolation such as
``${cluster.n_gpus_per_node}`` or ``${train_dataset.batch_size}`` resolves to the
dataclass's default when the YAML does not write that key (or an override deleted it with
``~``). :func:`referenced_defaults` finds those defaults, which the check of an AReaL
command writes into the composed config before it reads it
(:func:`areal_conf.command.check.compose_as_areal`), so that it resolves what AReaL
resolves; the reader of a config (:func:`areal_conf.config.reading.read_config`) asks
:func:`default_at` when an interpolation it follows names a key the config lacks, so that
``validate`` of a YAML as written resolves it too.

A default is written only where AReaL's tables (:mod:`areal_conf.config.known_keys`) say
what it is: a plain field that every experiment config with a class at that place
declares with the same default, under sections that are written or that AReaL makes by
default. Any other reference (a mandatory key, a section AReaL leaves null, a key only a
driver's config class declares, a relative ``${.key}``) is left as it is, and stays an
error where it is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

from areal_conf.config.known_keys import root_section, top_section
from areal_conf.config.known_values import NO_DEFAULT
from areal_conf.config.nodes import (
    children_of,
    is_written_list,
    is_written_section,
    item_of,
    keys_of,
    written_node_at,
)

#: ``${a.b.c}`` anywhere in a value: an absolute key (a resolver's ``${oc.env:X}`` is not).
_REFERENCE: Final = re.compile(r"\$\{([A-Za-z_]\w*(?:\.\w+)*)\}")


def referenced_defaults(cfg: Any, version: str) -> dict[str, object]:
    """AReaL ``version``'s default of each key an interpolation of ``cfg`` names and
    ``cfg`` lacks (see the module docstring), by full key, in config order."""
    found: dict[str, object] = {}
    for path in dict.fromkeys(_references(cfg)):
        if written_node_at(cfg, path) is None:
            default = default_at(cfg, path, version)
            if default is not NO_DEFAULT:
                found[path] = default
    return found


def _references(node: Any) -> Iterator[str]:
    """The keys the interpolations under ``node`` name, as written."""
    if is_written_section(node):
        for child in children_of(node).values():
            yield from _references(child)
    elif is_written_list(node):
        for index in range(len(node)):
            yield from _references(item_of(node, index))
    else:
        written = getattr(node, "_value", None)
        value = written() if callable(written) else node
        if isinstance(value, str) and "${" in value:
            yield from _REFERENCE.findall(value)


def default_at(cfg: Any, path: str, version: str) -> object:
    """AReaL's default for the absent key ``path``, or :data:`NO_DEFAULT` where it has
    none that areal-conf can tell."""
    parts = path.split(".")
    section = root_section(version)
    node: Any = cfg
    for depth, part in enumerate(parts[:-1]):
        written = node is not None and part in keys_of(node)
        child = written_node_at(node, part) if written else None
        if written and not is_written_section(child):
            return NO_DEFAULT  # null, a list, an interpolation: not a section to fill
        if not written and part not in section.made:
            return NO_DEFAULT  # AReaL leaves it null (or only a driver's class declares it)
        inner = top_section(version, part, child) if depth == 0 else section.child(part)
        if inner is None:
            return NO_DEFAULT
        section, node = inner, child
    fields = section.values.get(parts[-1], ())
    if not fields or any(field.mandatory for field in fields):
        return NO_DEFAULT
    if len({repr(field.default) for field in fields}) != 1:
        return NO_DEFAULT  # the experiment configs disagree: which applies is the driver's
    return fields[0].default

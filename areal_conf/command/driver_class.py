"""The config class an AReaL driver script loads its config into, read from its source.

A driver hands its config class to AReaL's loader (``config, _ = load_expr_config(args,
GRPOConfig)`` in ``examples/math/gsm8k_rl.py:10``), which merges the YAML into that class
strictly: a top-level key it does not have stops the run (``Key 'launcher' not in
'GRPOConfig'``). Which class that is depends on the driver, so the key check of a config
read alone leaves top-level keys alone; for an AReaL command whose script names the class,
:func:`driver_config_class` finds it without running the script (its source is parsed,
never imported): one of AReaL's experiment configs imported from ``areal``, or a dataclass
the script itself derives from one (``class MyConfig(GRPOConfig): extra: int = 0``), whose
own fields are added. Any other class (imported from elsewhere, built at run time) is
unknown, and the top level stays unchecked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from areal_conf.areal.drivers import imported_from_areal, loader_calls, parsed_script


@dataclass(frozen=True)
class DriverClass:
    """The config class of a driver: ``base`` is AReaL's experiment config it is or
    derives from, ``extra`` the fields the script's own subclasses add, ``name`` the
    class the script passes to ``load_expr_config``."""

    name: str
    base: str
    extra: frozenset[str] = frozenset()


def driver_config_class(script: Path, experiments: tuple[str, ...]) -> DriverClass | None:
    """The config class ``script`` loads its config into, when it is one of AReaL's
    ``experiments`` (their names) or derives from one in the script itself; else None."""
    tree = parsed_script(script)
    if tree is None:
        return None  # not a script it can read: the top level stays unchecked
    name = _loaded_class(tree)
    if name is None:
        return None
    imported = imported_from_areal(tree)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    extra: set[str] = set()
    current, seen = name, set()
    while current in classes and current not in seen:  # the script's own subclasses
        seen.add(current)
        node = classes[current]
        if len(node.bases) != 1 or not isinstance(node.bases[0], ast.Name):
            return None
        extra |= {
            item.target.id
            for item in node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        }
        current = node.bases[0].id
    base = imported.get(current)
    if base not in experiments:
        return None
    return DriverClass(name, base, frozenset(extra))


def check_top_level_keys(cfg: Any, driver: DriverClass, version: str) -> None:
    """Raise :class:`~areal_conf.config.known_keys.UnknownKey` for the first top-level
    key of ``cfg`` that the driver's config class lacks (AReaL ``version``'s fields of
    its base, and those its subclasses add), as AReaL's loader refuses it."""
    from areal_conf.config.known_keys import areal_keys, section_of, unknown_key
    from areal_conf.config.nodes import keys_of

    section = section_of(areal_keys(version), "", (driver.base,))
    keys = keys_of(cfg)
    for key in keys:
        if key not in section.fields and key not in driver.extra:
            raise unknown_key(cfg, keys, "", key, section, False)


def _loaded_class(tree: ast.Module) -> str | None:
    """The name passed as the config class to the script's one ``load_expr_config``."""
    found = set()
    for node in loader_calls(tree):
        arg = node.args[1] if len(node.args) > 1 else None
        for keyword in node.keywords:
            if keyword.arg == "config_cls":
                arg = keyword.value
        found.add(arg.id if isinstance(arg, ast.Name) else None)
    return found.pop() if len(found) == 1 else None

"""AReaL's config dataclasses as AReaL itself defines them, for tests/test_areal_loader.py.

Run with the AReaL loader's Python: ``python tests/areal_keys_driver.py LOAD_PY AREAL_SRC``.
It imports ``areal.api.cli_args`` from AReaL's source through the loader tool's shims
(``load.py``'s ``install_shims``: no torch, no GPUs) and prints, as one JSON object, every
dataclass of that module with what each of its fields holds, read from the live classes
(``dataclasses.fields`` and their resolved type hints), in the terms of
``scripts/areal_keys.py``: null (a value), a dataclass's name, that name with ``[]`` (a
list of them) or ``*`` (any keys). A second reading of AReaL's classes, by import where
the generator reads the source text.

With ``--values`` it prints instead the fields whose values OmegaConf converts, as
OmegaConf itself types them in ``OmegaConf.structured(cls)`` (the merge AReaL's loader
runs): ``{"type": "float", "optional": false, "default": 0.001}`` (no ``default`` where
the field has none, or its default is not a plain value; ``mandatory``: the structured
config holds ``???`` there, a value the config must give). With ``--made``: for each
class, the fields whose section a new instance makes (a ``default_factory`` of a
dataclass).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import sys
import types
import typing
from typing import Any


def kind(hint: Any) -> str | None:
    options = [hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
    kinds = set()
    for option in options:
        origin = typing.get_origin(option)
        args = typing.get_args(option)
        if option is Any or option is dict or origin is dict:
            kinds.add("*")
        elif dataclasses.is_dataclass(option):
            kinds.add(option.__name__)
        elif origin in (list, tuple) and args and dataclasses.is_dataclass(args[0]):
            kinds.add(f"{args[0].__name__}[]")
        else:
            kinds.add("")
    if "*" in kinds:
        return "*"
    sections = [k for k in kinds if k]
    return sections[0] if sections else None


def values(cls: type) -> dict[str, dict[str, Any]]:
    from omegaconf import BooleanNode, FloatNode, IntegerNode, OmegaConf, StringNode

    names = {BooleanNode: "bool", IntegerNode: "int", FloatNode: "float", StringNode: "str"}
    found: dict[str, dict[str, Any]] = {}
    cfg = OmegaConf.structured(cls)
    for field in dataclasses.fields(cls):
        node = cfg._get_node(field.name)
        kind = names.get(type(node))
        if kind is None:
            continue
        entry: dict[str, Any] = {"type": kind, "optional": node._is_optional()}
        if field.default is not dataclasses.MISSING and field.default != "???":
            entry["default"] = field.default
        entry["mandatory"] = node._is_missing()  # ??? in the structured config
        found[field.name] = entry
    return found


def made(cls: type) -> list[str]:
    """The fields whose section a new instance makes itself: a dataclass is the field's
    default factory."""
    return [
        f.name
        for f in dataclasses.fields(cls)
        if isinstance(f.default_factory, type) and dataclasses.is_dataclass(f.default_factory)
    ]


def main(load_py: str, areal_src: str, mode: str = "") -> int:
    spec = importlib.util.spec_from_file_location("areal_loader_load", load_py)
    assert spec is not None and spec.loader is not None
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    with contextlib.redirect_stdout(sys.stderr):
        loader.install_shims(areal_src, True)
        import areal.api.cli_args as cli_args
    found: dict[str, dict[str, str | None]] = {}
    for name, value in vars(cli_args).items():
        if not (isinstance(value, type) and dataclasses.is_dataclass(value)):
            continue
        if value.__module__ != cli_args.__name__:
            continue
        if mode == "--values":
            found[name] = values(value)
            continue
        if mode == "--made":
            found[name] = made(value)  # type: ignore[assignment]
            continue
        hints = typing.get_type_hints(value)
        found[name] = {f.name: kind(hints[f.name]) for f in dataclasses.fields(value)}
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], *sys.argv[3:4]))

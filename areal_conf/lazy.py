"""Names a module exports but imports only when first used: the package's public names
and the plugin's view of the core, which every Hydra app on the machine imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def exports_on_first_use(
    module: str, exports: Mapping[str, str], keep_in: MutableMapping[str, Any] | None = None
) -> Callable[[str], Any]:
    """A ``__getattr__`` for module ``module``: each name of ``exports`` (the name → the
    module that defines it) imported from its module when it is first read. With
    ``keep_in`` (the module's ``globals()``), the value is kept there, so that the next
    read finds it at once; without, it is read from its module at each use."""

    def __getattr__(name: str) -> Any:
        home = exports.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        if keep_in is not None:
            keep_in[name] = value
        return value

    return __getattr__

"""Hydra's and OmegaConf's exceptions read without importing either: each is recognised
by the module that defines it (loaded whenever such an exception exists), and a value a
typed config refused becomes areal-conf's message about it."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from typing import Any, Final, cast

from areal_conf.errors import AllocationError

#: The module that defines OmegaConf's exceptions.
OMEGACONF_ERRORS: Final = "omegaconf.errors"


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then its causes and contexts, each once."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def defined_in(exc: object, module: str, name: str) -> bool:
    """True when ``exc`` is a ``module.name`` (False while that module is not loaded)."""
    # The module is loaded whenever one of its exceptions exists; never import it here.
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return isinstance(cls, type) and isinstance(exc, cls)


def typed_value_error(exc: BaseException) -> AllocationError | None:
    """A value that a typed config (``areal_schema``, the sweeper's and the launcher's
    configs) refused while Hydra composed it, from an override (``cluster.n_nodes=inf``,
    ``hydra.sweeper.fits=maybe``) or a file: the key, the value and a fix. The message is
    the one areal-conf's readers give the value (:func:`areal_conf.validation.value_error`),
    else the type the key takes and its default, from the config's dataclass."""
    found = next(
        (e for e in chain(exc) if defined_in(e, OMEGACONF_ERRORS, "ValidationError")), None
    )
    if found is None:
        return None
    key, value = getattr(found, "full_key", None), getattr(found, "value", None)
    if not key:  # refused while a file was merged onto the schema (`actor: 5`)
        key, value = _merged_key(exc)
    if not key or not isinstance(key, str):
        return None
    from areal_conf.validation import value_error

    error = value_error(key, value)
    if error is not None:
        return error
    reason = str(getattr(found, "msg", "") or found).split("\n")[0]
    owner, field_name = getattr(found, "object_type", None), key.rpartition(".")[2]
    fields = (
        {f.name: f for f in dataclasses.fields(cast(Any, owner))} if _is_dataclass(owner) else {}
    )
    default = fields[field_name].default if field_name in fields else dataclasses.MISSING
    if default is dataclasses.MISSING or isinstance(default, dict | list):
        hint = f"give {key} a value of its type, or leave it out"
    else:
        hint = f"e.g. {key}={_as_override(default)} (its default)"
    error = AllocationError(f"{key}: {reason}", value, None, hint=hint)
    error.key = key
    return error


#: Where OmegaConf merges one key of a mapping onto another (``key`` from ``src`` onto
#: ``dest``): a ValidationError raised below it and reported without a key is that key's.
_MAP_MERGE: Final = ("omegaconf.basecontainer", "_map_merge")


def _merged_key(error: BaseException) -> tuple[str | None, object]:
    """The dotted key, and its value, that OmegaConf was merging when it raised ``error``
    (the innermost merge of a nested one), from the frames it passed through (OmegaConf
    2.4 re-raises the error it formats: the frames are its cause's)."""
    key: str | None = None
    value: object = None
    for raised in chain(error):
        tb = raised.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if (frame.f_globals.get("__name__"), frame.f_code.co_name) == _MAP_MERGE:
                name, dest, src = (frame.f_locals.get(k) for k in ("key", "dest", "src"))
                if isinstance(name, str):
                    try:
                        key = str(cast(Any, dest)._get_full_key(name)) or name
                        value = cast(Any, src)._get_node(name)._value()
                    except Exception:  # another OmegaConf: keep the bare key
                        key, value = name, None
            tb = tb.tb_next
        if key is not None:
            return key, value
    return key, value


def _is_dataclass(kind: object) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _as_override(value: object) -> str:
    """A value as a Hydra override writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)

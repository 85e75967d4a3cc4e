"""Raw access to a composed config's nodes, for the one reader of a config.

:func:`read_value` reads one key of a section (an OmegaConf DictConfig or any mapping),
following a ``${a.b}`` interpolation itself (OmegaConf parses every interpolation with its
grammar, the larger part of a read) and turning one that only the application can resolve
into an AllocationError naming the key. The ``read_*`` coercers read a key as AReaL's typed
loader would take it (``"true"`` for a bool, ``"4"`` for an int) or refuse it with the key
and a fix. OmegaConf's node internals (``_get_node``, ``_value``, ``_is_interpolation``,
...) are read without importing OmegaConf, so a plain mapping reads the same.
The last group (:func:`written_node_at`, :func:`written_at`, ...) reads nodes as written,
nothing resolved, for the check of a config's keys and values.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Final

from areal_conf.areal.roles import example_backend
from areal_conf.config.known_values import NO_DEFAULT, written_value
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import Fix, either, fix, sentence

#: While :func:`areal_conf.config.reading.read_config` reads a config: the keys of each section it
#: has asked about, by ``id`` (the config, and so every section, lives as long as the read).
#: Most keys the rules read are absent, and a DictConfig builds its list of keys anew at
#: every ask.
KEYS_SEEN: ContextVar[dict[int, frozenset[str]] | None] = ContextVar("keys_seen", default=None)
#: While :func:`areal_conf.config.reading.read_config` reads a config: the full keys it found
#: (``actor.offload``).
PRESENT: ContextVar[set[str] | None] = ContextVar("present", default=None)
#: While :func:`areal_conf.config.reading.read_config` reads a config: the values it read
#: that were interpolations, as written, by full key.
INTERPOLATIONS: ContextVar[dict[str, str] | None] = ContextVar("interpolations", default=None)
#: While :func:`areal_conf.config.reading.read_config` reads a config: AReaL's default for
#: a key an interpolation names and the config lacks, by full key (``NO_DEFAULT``: none),
#: as AReaL's loader merges the config onto its dataclasses before resolving it.
ABSENT_DEFAULT: ContextVar[Callable[[str], object] | None] = ContextVar(
    "absent_default", default=None
)


def has_key(section: Any, key: str) -> bool:
    seen = KEYS_SEEN.get()
    if seen is None:
        # keys() rather than `in`: a struct-mode DictConfig raises (and formats)
        # internally for every absent key it is asked about.
        return key in section.keys()  # noqa: SIM118
    keys = seen.get(id(section))
    if keys is None:
        keys = seen[id(section)] = frozenset(str(k) for k in section.keys())  # noqa: SIM118
    return key in keys


#: ``${a.b.c}``: an interpolation of another key, which :func:`read_value` follows itself
#: (OmegaConf parses every interpolation with its grammar, the larger part of a read).
_KEY_INTERPOLATION: Final = re.compile(r"\$\{([A-Za-z_]\w*(?:\.\w+)*)\}")
_UNREAD: Final = object()  # a value read_value leaves to OmegaConf


def read_value(section: Any, key: str, where: str, default: Any = None) -> Any:
    """``section[key]`` (resolving an interpolation) or ``default`` when the key is absent;
    a value that cannot be resolved is an AllocationError naming ``where``."""
    if not has_key(section, key):
        return default
    present = PRESENT.get()
    if present is not None:
        present.add(where)
    get_node = getattr(section, "_get_node", None)
    if callable(get_node):
        value = _node_value(get_node(key), 0, where)
        if value is not _UNREAD:
            return default if value is None and default is not None else value
    try:
        return section.get(key, default)
    except AllocationError:
        raise
    except Exception as err:  # an interpolation only the application can resolve
        get_node = getattr(section, "_get_node", None)
        node = get_node(key) if callable(get_node) else None
        written = node._value() if node is not None and hasattr(node, "_value") else None
        raise unresolvable(where, err, written) from None


def _node_value(node: Any, depth: int, where: str = "") -> Any:
    """What ``get`` returns for an OmegaConf node: the section itself, a plain value, or
    the value a ``${a.b}`` interpolation names, followed here without OmegaConf's grammar;
    ``_UNREAD`` for anything else (a resolver, a relative or missing key, ``???``). An
    interpolation read at the key ``where`` is recorded (:data:`INTERPOLATIONS`)."""
    if node is None or depth > 8 or node._is_missing():
        return _UNREAD
    if not node._is_interpolation():
        if node._is_none():
            return None
        if isinstance(node, Mapping | Sequence) and not isinstance(node, str):
            return node
        return node._value()
    written = node._value()
    interpolations = INTERPOLATIONS.get() if where else None
    if interpolations is not None:
        interpolations[where] = str(written)
    match = _KEY_INTERPOLATION.fullmatch(written) if isinstance(written, str) else None
    if match is None:
        return _UNREAD
    target: Any = node._get_root()
    for part in match[1].split("."):
        child_node = getattr(target, "_get_node", None)
        if not callable(child_node):
            return _UNREAD
        if isinstance(target, Mapping):
            target = child_node(part) if has_key(target, part) else None
        elif isinstance(target, Sequence) and part.isdigit() and int(part) < len(target):
            target = child_node(int(part))
        else:
            return _UNREAD
        if target is None:
            return _absent_default(match[1])
    return _node_value(target, depth + 1)


def _absent_default(key: str) -> Any:
    """AReaL's default for the absent ``key`` an interpolation names, or ``_UNREAD``."""
    default_of = ABSENT_DEFAULT.get()
    default = NO_DEFAULT if default_of is None else default_of(key)
    return _UNREAD if default is NO_DEFAULT else default


def unresolvable(key: str | None, err: BaseException, written: object = None) -> AllocationError:
    """The error for a config value whose interpolation cannot be resolved (an unset
    environment variable, a missing key): the key, OmegaConf's reason, the text as
    written, and the fix."""
    reason = getattr(err, "msg", None) or str(err) or repr(err)
    # "KeyError raised while resolving interpolation: \"Environment variable ...\""
    reason = reason.split("\n")[0].split(" raised while resolving interpolation: ")[-1].strip('"')
    missing = type(err).__name__ == "MissingMandatoryValue"
    if missing:
        reason = "the value is missing (???)"
    example: str | Fix = f"{key}=<value>" if key else "<key>=<value>"
    if key and key.endswith(".backend"):
        example = fix(f"{key}={example_backend(key.split('.')[0])}")
    hint = sentence(
        "give it a value, e.g. "
        if missing
        else "fix the interpolation (the referenced key or environment variable) or write "
        "the value itself, e.g. ",
        example,
    )
    where = f"{key}: " if key else "a value of the config cannot be resolved: "
    error = AllocationError(where + reason, written, None, hint=hint)
    error.key = key
    return error


def is_mapping(value: Any) -> bool:
    is_missing = getattr(value, "_is_missing", None)  # an OmegaConf section left as ???
    missing = callable(is_missing) and bool(is_missing())
    return isinstance(value, Mapping) and not is_null(value) and not missing


def is_null(value: Any) -> bool:
    is_none = getattr(value, "_is_none", None)
    return value is None or (callable(is_none) and bool(is_none()))


def is_unset_section(node: Any) -> bool:
    """True for an engine section that a schema holds but the config never set: a config
    node of a dataclass marked ``schema_section`` (the engine sections of
    ``areal_schema``) whose values, as written, are still that dataclass's defaults. It is
    no engine, as an absent section (OmegaConf cannot type a section that is absent)."""
    kind = getattr(getattr(node, "_metadata", None), "object_type", None)
    if not getattr(kind, "schema_section", False) or is_null(node) or node._is_missing():
        return False
    assert isinstance(kind, type)
    return bool(_as_written(node) == _defaults_of(kind))


@functools.cache
def _defaults_of(kind: type) -> Any:
    return dataclasses.asdict(kind())


def _as_written(node: Any) -> Any:
    """A config node's values as written (interpolations unresolved), as plain data."""
    if is_null(node):
        return None
    child = getattr(node, "_get_node", None)
    if isinstance(node, Mapping) and callable(child):
        return {str(k): _as_written(child(k)) for k in node}
    if isinstance(node, Sequence) and not isinstance(node, str) and callable(child):
        return [_as_written(child(i)) for i in range(len(node))]
    return node._value() if hasattr(node, "_value") else node


def is_absent(value: Any) -> bool:
    """A role section that is no engine: null, or left as the schema gives it."""
    return is_null(value) or is_unset_section(value)


def given_section(value: Any) -> bool:
    return is_mapping(value) and not is_unset_section(value)


def section_at(cfg: Any, path: str) -> Any:
    """The section at a dotted ``path`` (None when a part is absent or not a section)."""
    node = cfg
    for part in path.split("."):
        if not is_mapping(node):
            return None
        node = read_value(node, part, path)
    return node if is_mapping(node) else None


#: The strings OmegaConf (so AReaL's typed loader) reads as a bool.
_BOOL_TEXT: Final = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


def read_bool(section: Any, key: str, where: str, default: bool) -> bool:
    value = read_value(section, key, where, None)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in _BOOL_TEXT:
        return _BOOL_TEXT[value.lower()]
    if not isinstance(value, bool):
        raise ConfigError(
            f"{where}: must be true or false, got {value!r}",
            hint=f"e.g. {where}={str(not default).lower()}",
        )
    return value


def as_int_field(value: Any) -> Any:
    """``value`` as AReaL's typed loader takes it for an ``int`` field: text of a whole
    number (``'8'``, from ``${oc.env:N}`` or quoted) is that number; anything else as it
    is."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and value.isascii():
        return int(value)
    return value


def read_int(
    section: Any, key: str, where: str, default: int | None, example: int, least: int = 1
) -> int | None:
    """A whole number from ``least`` (None: absent, then ``default``)."""
    value = as_int_field(read_value(section, key, where, None))
    if value is None:
        return default
    if type(value) is not int or value < least:
        raise ConfigError(
            f"{where}: must be a whole number from {least}, got {value!r}",
            hint=fix(f"{where}={example}", lead="e.g. "),
        )
    return value


def read_number(
    section: Any, key: str, where: str, *, least: float = -math.inf, most: float = math.inf
) -> int | float | None:
    """A number from ``least`` to ``most`` as written (an int stays an int, so messages
    quote it as written); NaN and infinities are no numbers here. (``actor.kl_ctl`` has
    no bound: AReaL reads a negative one as no KL penalty, rl_trainer.py:205.)"""
    value = read_value(section, key, where, None)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not least <= value <= most
        or not math.isfinite(value)
    ):
        bounds = (f" from {least:g}" if least > -math.inf else "") + (
            f" to {most:g}" if most < math.inf else ""
        )
        raise ConfigError(
            f"{where}: must be a number{bounds}, got {value!r}",
            hint=either(
                fix(f"{where}=0.0", lead="e.g. ", remark=" (no ref model)"),
                " or ",
                fix(f"{where}=0.1"),
            )
            if key == "kl_ctl"
            else fix(f"{where}=0.9", lead="e.g. "),
        )
    return value


def read_text(section: Any, key: str, where: str, default: object) -> object:
    """A string key as written (None: absent); the rules check the value."""
    value = read_value(section, key, where, None)
    return default if value is None else value


# ---------------------------------------------------------- nodes as written, unresolved
# For the check of a config's keys and values (:mod:`areal_conf.config.known_keys`): a
# config is an OmegaConf DictConfig or any nested mapping, read as written; nothing is
# resolved (an interpolation is left to the key that reads it).


def written_node_at(cfg: Any, path: str) -> Any:
    node = cfg
    for part in path.split(".") if path else ():
        if is_written_list(node) and part.isdigit() and int(part) < len(node):
            node = item_of(node, int(part))
        elif is_written_section(node) and part in keys_of(node):
            node = child_of(node, part)
        else:
            return None
    return node


def keys_of(node: Any) -> list[str]:
    try:
        return [str(k) for k in node]
    except Exception:  # a value that is no section after all
        return []


def child_of(node: Any, key: str) -> Any:
    get_node = getattr(node, "_get_node", None)
    if callable(get_node):
        return get_node(key)
    try:
        return node[key]
    except Exception:  # a value only the application can resolve: not a section here
        return None


def children_of(node: Any) -> dict[str, Any]:
    """A section's keys (as text) and their nodes, as written. A DictConfig's own table
    of them is read at once: asking it for each node by key (``_get_node``) checks the
    key every time, the larger part of a config's key and value check."""
    content = getattr(node, "_content", None)
    if isinstance(content, dict) and callable(getattr(node, "_get_node", None)):
        return {str(key): child for key, child in content.items()}
    return {key: child_of(node, key) for key in keys_of(node)}


def item_of(node: Any, index: int) -> Any:
    get_node = getattr(node, "_get_node", None)
    return get_node(index) if callable(get_node) else node[index]


def is_plain(node: Any) -> bool:
    """Not null, ``???`` or an interpolation (whose target is checked where it is)."""
    if node is None:
        return False
    for flag in ("_is_none", "_is_missing", "_is_interpolation"):
        test = getattr(node, flag, None)
        if callable(test) and test():
            return False
    return True


def is_written_section(node: Any) -> bool:
    return isinstance(node, Mapping) and is_plain(node)


def is_written_list(node: Any) -> bool:
    return isinstance(node, Sequence) and not isinstance(node, str | bytes) and is_plain(node)


def typed_by_areal_conf(node: Any) -> bool:
    """A section that areal-conf's schema types (``areal_schema``): an own config."""
    kind = getattr(getattr(node, "_metadata", None), "object_type", None)
    return getattr(kind, "__module__", "") == "areal_conf.hydra.structured"


def written_at(node: Any, key: str) -> Any:
    """The value under ``key`` as written, as plain data (interpolations unresolved)."""
    child = child_of(node, key)
    if is_written_section(child):
        return {k: written_at(child, k) for k in keys_of(child)}
    if is_written_list(child):
        return list(child)  # as a list: overrides do not rewrite it
    return written_value(child)

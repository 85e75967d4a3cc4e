"""Bounded reading of YAML files: a file is checked before anything builds objects from it.

Hydra hands every config file it loads to OmegaConf, which builds a node for every value,
and for every value an alias (``*a``) refers to, again at every reference: a "billion
laughs" alias bomb of a few hundred bytes expands to 10^9 nodes and runs for ever;
PyYAML's composer follows nesting by recursion (``x: [[[[...]]]]`` 10,000 deep is a
RecursionError); a file that is not UTF-8 is a UnicodeDecodeError. :func:`check_yaml_file`
reads the file's bytes once and checks, in this order:

1. its size (:data:`LIMITS` ``bytes``), before the bytes are decoded or parsed;
2. that it is UTF-8 text: a UTF-16/UTF-32 byte-order mark or a NUL byte is a file saved
   in UTF-16/32 (or no text at all), a byte that is not UTF-8 is named by line and column;
3. one pass over PyYAML's event stream (:func:`yaml.parse`: the parser is a state
   machine, no recursion, and builds no nodes), counting the nesting depth and the nodes
   the file becomes once every alias is expanded. Per anchor, the expanded size and
   height of its node are kept when the node ends, so an alias costs one addition; an
   alias to a node that has not ended is a structure that contains itself, refused.

Each refusal is one :class:`UnreadableYaml` naming the file, the limit, the measured value
and the environment variable that raises the limit. A file that does not parse is left
to the loader that follows, whose error areal-conf reports as it always has
(:func:`areal_conf.config.yaml_errors.unparsable_yaml`).

The limits are far above any real config (the 93 YAML files of AReaL 2.0: at most 13 KB,
nested 6 levels, 516 values) and far below what makes reading slow (OmegaConf builds
about 20,000 values a second): see :data:`LIMITS`.

This module imports no Hydra; the Hydra-facing part, which makes every file a Hydra
composition loads go through the check, is :mod:`areal_conf.hydra.files`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from areal_conf.errors import AllocationError


@dataclass(frozen=True)
class Limit:
    """One limit of a YAML file: what it bounds, its default, and the environment
    variable that sets it."""

    env: str
    default: int
    what: str  # "size", "nesting depth", ...
    unit: str  # "bytes", "levels", ...


#: Every limit, stated once. Defaults: 80× the largest of AReaL's YAML files (13 KB), 10×
#: their nesting (6), 97× their number of values (516). Hydra composes about 20,000
#: values a second: a file at the limit of values takes 2-3 s, an alias bomb of 5 levels
#: of 9 aliases (75,000 values, 4 s) is refused.
LIMITS: Final[Mapping[str, Limit]] = {
    "bytes": Limit("AREAL_CONF_YAML_MAX_BYTES", 1 << 20, "size", "bytes"),
    "depth": Limit("AREAL_CONF_YAML_MAX_DEPTH", 64, "nesting", "levels"),
    "nodes": Limit("AREAL_CONF_YAML_MAX_NODES", 50_000, "number of values", "values"),
}


class UnreadableYaml(AllocationError):
    """A YAML file areal-conf refuses to read: over a limit of :data:`LIMITS`, or not
    UTF-8 text."""


def limits(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """Each limit of :data:`LIMITS` in force: its environment variable's value, else its
    default. A value that is not a positive whole number is an AllocationError naming
    the variable."""
    env = os.environ if environ is None else environ
    values = {}
    for name, limit in LIMITS.items():
        text = env.get(limit.env, "").strip()
        if not text:
            values[name] = limit.default
            continue
        if not (text.isascii() and text.isdigit() and int(text) > 0):
            error = AllocationError(
                f"{limit.env}: the largest {limit.what} of a YAML file areal-conf reads, in "
                f"{limit.unit}, must be a positive whole number, got {text!r}",
                hint=f"e.g. {limit.env}={limit.default * 4} (the default is {limit.default})",
            )
            error.variable = limit.env
            raise error
        values[name] = int(text)
    return values


def check_yaml_file(path: str | os.PathLike[str], shown: str | None = None) -> None:
    """Refuse (:class:`UnreadableYaml`) the YAML file at ``path`` (named ``shown`` in the
    message, by default as :func:`areal_conf.config.yaml_errors.file_shown` names it) when it is
    over a limit or not UTF-8 text; return when it may be loaded. A file that does not
    parse passes: the loader reports it."""
    from areal_conf.config.yaml_errors import file_shown

    bound = limits()
    name = shown if shown is not None else file_shown(str(path))
    with open(path, "rb") as f:  # at most one byte past the limit, whatever the file
        data = f.read(bound["bytes"] + 1)
    if len(data) > bound["bytes"]:
        size = max(os.stat(path).st_size, len(data))
        raise _over(name, "bytes", size, bound["bytes"], "the file is")
    text = _utf8_text(data, name)
    depth, nodes, where = measure(text, bound, name)
    if depth > bound["depth"]:
        raise _over(name, "depth", depth, bound["depth"], "values are nested", where["depth"])
    if nodes > bound["nodes"]:
        raise _over(name, "nodes", nodes, bound["nodes"], "the file holds", where["nodes"])


_BOMS: Final = (  # longest first: UTF-32 LE starts with UTF-16 LE's mark
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def _utf8_text(data: bytes, name: str) -> str:
    """``data`` decoded as UTF-8, else :class:`UnreadableYaml` saying what it is."""
    hint = "save the file as UTF-8 (Hydra, and so AReaL, reads config files as UTF-8)"
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            raise UnreadableYaml(
                f"cannot read {name}: the file is saved as {encoding} (it starts with a "
                f"{encoding} byte-order mark), not as UTF-8",
                hint=hint + f", e.g. iconv -f {encoding} -t UTF-8",
            )
    nul = data.find(b"\x00")
    if nul != -1:
        line, column = _line_column(data, nul)
        raise UnreadableYaml(
            f"cannot read {name}: NUL byte at line {line}, column {column}: the file is saved "
            "as UTF-16 or UTF-32, or is no text file, not UTF-8 text",
            hint=hint,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line, column = _line_column(data, err.start)
        bad = data[err.start : err.end].hex(" ")
        raise UnreadableYaml(
            f"cannot read {name}: byte {bad} at line {line}, column {column} is not UTF-8 "
            "text (the file is saved in another encoding, or holds no text)",
            hint=hint + ", e.g. iconv -f LATIN1 -t UTF-8 when it was saved as Latin-1; or "
            "write that character as UTF-8",
        ) from None


def _line_column(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in characters) of byte ``offset`` of ``data``."""
    start = data.rfind(b"\n", 0, offset) + 1
    before = data[start:offset].decode("utf-8", errors="replace")
    return data.count(b"\n", 0, offset) + 1, len(before) + 1


#: Where counting values stops: aliases of aliases double a count at every level, and a
#: number of a few thousand digits is slow to add and cannot be printed.
MANY: Final = 10**18


class _Open:
    """A sequence or mapping whose end the pass has not reached yet."""

    __slots__ = ("anchor", "height", "nodes")

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.nodes = 1  # itself, and its values once they end
        self.height = 1  # levels of nesting, itself included


def measure(
    text: str, bound: Mapping[str, int], name: str = "the YAML file"
) -> tuple[int, int, dict[str, Any]]:
    """The deepest nesting of ``text`` and its number of values (mapping keys, values,
    list items, sections) once every alias is expanded, in one pass over PyYAML's events;
    with, per limit of ``bound`` the file is over, where it first went over (an event's
    start mark, and whether an alias took it there). A structure that refers to itself
    is an :class:`UnreadableYaml`; a text that does not parse is measured up to its
    error (the loader reports the error).

    The C parser (libyaml), when PyYAML has it, is used first; where it finds an error,
    the pure Python parser (the one OmegaConf loads with) measures the text again."""
    import yaml

    parsers = [getattr(yaml, "CSafeLoader", None), yaml.SafeLoader]
    for loader in [p for p in parsers if p is not None]:
        try:
            return _measure_events(yaml.parse(text, Loader=loader), bound, name)
        except yaml.YAMLError:
            continue
    return 0, 0, {}  # unparsable: below every limit as far as it parses


def _measure_events(
    events: Any, bound: Mapping[str, int], name: str
) -> tuple[int, int, dict[str, Any]]:
    import yaml

    stack: list[_Open] = []
    open_anchors: dict[str, int] = {}  # anchors of the collections in `stack`
    done: dict[str, tuple[int, int]] = {}  # per anchor: expanded values and height
    depth = nodes = 0
    where: dict[str, Any] = {}
    for event in events:
        if isinstance(event, yaml.CollectionEndEvent):
            ended = stack.pop()
            if ended.anchor is not None:
                done[ended.anchor] = (ended.nodes, ended.height)
                open_anchors[ended.anchor] -= 1
            if stack:
                stack[-1].nodes = min(stack[-1].nodes + ended.nodes, MANY)
                stack[-1].height = max(stack[-1].height, ended.height + 1)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # stream and document starts and ends
        alias = isinstance(event, yaml.AliasEvent)
        if alias:
            if open_anchors.get(event.anchor):
                raise _refers_to_itself(event, name)
            size, height = done.get(event.anchor, (1, 0))  # undefined: the loader says so
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Open(event.anchor))
            if event.anchor is not None:
                open_anchors[event.anchor] = open_anchors.get(event.anchor, 0) + 1
            size, height = 1, 0  # its values count as they end
        else:
            size, height = 1, 0
            if event.anchor is not None:
                done[event.anchor] = (1, 0)
        nodes = min(nodes + size, MANY)
        depth = max(depth, len(stack) + height)
        if not isinstance(event, yaml.CollectionStartEvent) and stack:
            stack[-1].nodes = min(stack[-1].nodes + size, MANY)
            stack[-1].height = max(stack[-1].height, height + 1)
        for limit, value in (("depth", depth), ("nodes", nodes)):
            if value > bound[limit] and limit not in where:
                where[limit] = (event.start_mark, alias)
    return depth, nodes, where


def _refers_to_itself(event: Any, name: str) -> UnreadableYaml:
    mark = event.start_mark
    return UnreadableYaml(
        f"cannot read {name} (line {mark.line + 1}, column {mark.column + 1}): alias "
        f"*{event.anchor} is inside the value its anchor &{event.anchor} names, so the value "
        "would contain itself without end",
        hint=f"write the value of *{event.anchor} there instead of the alias, or move the "
        f"alias out of the value of &{event.anchor}",
    )


def _over(
    name: str, limit: str, measured: int, bound: int, found: str, where: Any = None
) -> UnreadableYaml:
    """The refusal of a file over the limit ``limit`` of :data:`LIMITS`: ``found`` says
    what was measured (``"values are nested"``), ``where`` is ``(mark, alias)`` of the
    event that first went over the limit."""
    spec = LIMITS[limit]
    shown = f"{measured:,}" if measured < MANY else f"more than {MANY - 1:,}"
    fix = (
        f"if this file is meant to be read as it is, raise the limit: {spec.env}={measured}"
        if measured < MANY
        else "no limit reads it: write the values its aliases repeat fewer times"
    )
    place = how = ""
    if where is not None:
        mark, alias = where
        how = " once its aliases are expanded" if alias else ""
        place = f" (over it from line {mark.line + 1}, column {mark.column + 1} on)"
    return UnreadableYaml(
        f"cannot read {name}: {found} {shown} {spec.unit}{how}, over areal-conf's limit "
        f"of {bound:,} {spec.unit} for a YAML config{place}",
        hint=f"AReaL's configs stay far below it; {fix}",
    )

"""Translation of AReaL's deprecated top-level ``allocation_mode``.

``allocation_mode`` described every engine in one string; areal-conf configures each
engine through its own ``<engine>.backend`` field instead.  This module turns a legacy
string into the equivalent Hydra overrides (or YAML), so that the error which rejects
``allocation_mode`` can say exactly what to write instead.

Legacy syntax accepted (the union of what AReaL's ``alloc_mode.py`` grammars accepted
over time, old and new):

* ``a+b+c``          components on separate GPUs ("disaggregation");
* ``a|b|c``          ``b`` and ``c`` colocated with ``a`` (``|`` binds tighter than
  ``+``); a ``|`` inside parentheses, or one followed by ``ffn``, belongs to the
  hybrid MoE form ``(attn:..|ffn:..)`` / ``attn:..|ffn:..`` instead;
* ``backend:dims``, ``backend:(attn:..|ffn:..)``, ``backend:attn:..|ffn:..``;
* ``backend[name]:dims``  a named component (AReaL's docstrings also spell it
  ``backend(name)`` in prose, but its grammar only ever parsed square brackets);
* ``[name]:dims``    named, backend chosen by the auto-backend rule below;
* ``sglang.d4p1t1``  the old dot form (inference backends only, as in AReaL);
* bare training dims ``d4p2t1`` and a bare hybrid ``(attn:..|ffn:..)``: the old
  auto-backend rule, megatron when ``p > 1`` or ``e > 1`` (and for every hybrid),
  otherwise fsdp;
* ``inference+eval`` / ``inference+cpu``: evaluation on CPU, which needs no engine,
  so the ``eval``/``cpu`` component translates to nothing.

Unnamed components: an inference component is ``rollout`` and the first training
component is ``actor``.  AReaL accepted a second unnamed training component but then
could not tell which model it was (its ``train`` property raised "ambiguous"), so
that is an error asking for a name.

Deliberately not supported (each is an AllocationError with a hint):

* component names other than the five engine roles (AReaL accepted any
  identifier, e.g. ``sglang[r]:d2``); the hint suggests the engine meant;
* a second unnamed inference or training component, and duplicate names;
* ``eval``/``cpu`` inside a ``|`` group, and ``[name]`` followed by a ``.``;
* colocated components whose world sizes differ (AReaL rejected them too).

Deliberately more lenient than AReaL: three or more components need not all be named
when the rules above name them unambiguously, and a hybrid component may be named.

Each component is parsed by :mod:`areal_conf.spec.grammar`, which never calls back here:
the public ``parse_backend`` adds this module's translation to its legacy-syntax error.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from areal_conf.areal.roles import ROLE, ROLE_NAMES
from areal_conf.areal.versions import TEACHER_LAYOUT_NAMES
from areal_conf.arguments import choice
from areal_conf.errors import AllocationError
from areal_conf.hints import fix, sentence
from areal_conf.overrides import hydra_value
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import BACKENDS, INFERENCE_BACKENDS, join_or
from areal_conf.spec.grammar import parse

__all__ = [
    "migrate_allocation_mode",
    "migrated_backends",
    "migration_yaml",
]

# Component names are the roles; every role is on its own GPUs unless told otherwise.
ENGINES = ROLE_NAMES
_INFERENCE_ENGINES = frozenset(n for n, r in ROLE.items() if r.kind == "inference")
# AReaL's old ``inference+eval`` form: evaluation processes on CPU, no engine.
_EVAL_WORDS = frozenset({"eval", "cpu"})

_BLANKS = " \t"
_HEADER = re.compile(
    r"(?P<backend>[A-Za-z_][A-Za-z0-9_]*)?[ \t]*"
    r"(?:\[(?P<name>[^\[\]]*)\][ \t]*)?"
    r"(?P<sep>[:.])",
    re.ASCII,
)
_BARE_START = re.compile(r"(?:\(|attn[ \t]*:|[dtpce](?![A-Za-z_]))", re.ASCII)
_SIZED_DIM = re.compile(r"([dtpce])[ \t]*([0-9]+)", re.ASCII)
_FFN_AHEAD = re.compile(r"[ \t]*ffn", re.ASCII)


class _Entry(NamedTuple):
    """One engine of the translation."""

    engine: str
    backend: str  # canonical spec, e.g. ``sglang:d4t2``
    scheduling: str  # ``colocation`` or ``separation``
    target: str | None


class _Component(NamedTuple):
    start: int  # span in the legacy string, blanks stripped
    end: int
    name: str | None  # from ``backend[name]:``
    name_pos: int
    alloc: ModelAllocation


# --------------------------------------------------------------------------- public


def migrate_allocation_mode(legacy: str, *, teacher_layout: str = "nested") -> list[str]:
    """Hydra overrides equivalent to a deprecated ``allocation_mode`` string.

    >>> migrate_allocation_mode("sglang:d4t2+fsdp:d8")  # doctest: +NORMALIZE_WHITESPACE
    ['rollout.backend=sglang:d4t2', 'rollout.scheduling_strategy.type=separation',
     'actor.backend=fsdp:d8', 'actor.scheduling_strategy.type=separation']

    Every engine says how it is scheduled: ``+`` separates engines even where the
    config the overrides are applied to colocates them (AReaL's examples colocate
    ``ref`` with ``actor``).

    Values are canonical backend strings (``str(parse_backend(...))``) written for
    Hydra's override grammar, so ``compose(overrides=...)`` takes the list as it is
    (a hybrid layout is quoted: ``actor.backend='megatron:(attn:d2p2t2c2|ffn:d2p2t2e2)'``);
    :func:`areal_conf.overrides.shell_line` quotes them for a shell.  Raises
    :class:`AllocationError` whose ``spec`` is ``legacy`` and whose ``position``
    points into it.

    A teacher is written as the AReaL version reads it: ``teacher_layout="nested"``
    (AReaL 2.0) puts it under ``teacher.train`` (with ``teacher.engine_type=train``) or
    ``teacher.rollout``; ``"flat"`` (AReaL 1.0) writes ``teacher.backend``.
    """
    teacher_layout = check_teacher_layout(teacher_layout)
    overrides: list[str] = []
    for entry in _translate(legacy):
        section = _section(entry, teacher_layout)
        if section == "teacher.train":
            overrides.append("teacher.engine_type=train")
        overrides.append(f"{section}.backend={hydra_value(entry.backend)}")
        overrides.append(f"{section}.scheduling_strategy.type={entry.scheduling}")
        if entry.target is not None:
            overrides.append(f"{section}.scheduling_strategy.target={entry.target}")
    return overrides


def check_teacher_layout(value: object) -> str:
    """The ``teacher_layout`` argument: ``nested`` (AReaL 2.0) or ``flat`` (1.0)."""
    return choice(
        "teacher_layout",
        value,
        TEACHER_LAYOUT_NAMES,
        hint='"nested" (AReaL 2.0: teacher.train / teacher.rollout) or "flat" (AReaL 1.0)',
    )


def migration_yaml(legacy: str, *, teacher_layout: str = "nested") -> str:
    """The translation of :func:`migrate_allocation_mode` as a YAML block.

    Every scalar is double-quoted, so ``yaml.safe_load`` gives back exactly the
    strings of the overrides.  The block ends with a newline.
    """
    lines: list[str] = []
    for entry in _translate(legacy):
        section = _section(entry, teacher_layout)
        indent = ""
        if section != entry.engine:  # teacher.train / teacher.rollout
            lines.append("teacher:")
            if section == "teacher.train":
                lines.append(f"  engine_type: {_yaml_quote('train')}")
            lines.append(f"  {section.partition('.')[2]}:")
            indent = "  "
        else:
            lines.append(f"{entry.engine}:")
        lines.append(f"{indent}  backend: {_yaml_quote(entry.backend)}")
        lines.append(f"{indent}  scheduling_strategy:")
        lines.append(f"{indent}    type: {_yaml_quote(entry.scheduling)}")
        if entry.target is not None:
            lines.append(f"{indent}    target: {_yaml_quote(entry.target)}")
    return "\n".join(lines) + "\n"


def migrated_backends(legacy: str) -> dict[str, str]:
    """Each engine of a deprecated ``allocation_mode`` and its canonical backend string."""
    return {entry.engine: entry.backend for entry in _translate(legacy)}


def _section(entry: _Entry, teacher_layout: str) -> str:
    """Where the entry's keys go: its engine, or AReaL 2.0's teacher.train/teacher.rollout."""
    if entry.engine != "teacher" or teacher_layout != "nested":
        return entry.engine
    kind = BACKENDS[entry.backend.partition(":")[0]].kind
    return "teacher.rollout" if kind == "inference" else "teacher.train"


# ---------------------------------------------------------------------- translation


def _translate(legacy: object) -> list[_Entry]:
    if not isinstance(legacy, str):
        raise AllocationError(
            f"allocation_mode must be a string, got {type(legacy).__name__}",
            legacy,
            hint='write it in quotes, e.g. allocation_mode: "sglang:d4t2+fsdp:d8"',
        )
    if not legacy.strip(_BLANKS):
        raise AllocationError(
            "empty allocation_mode",
            legacy,
            hint=sentence(
                "set each engine's backend instead, e.g. ",
                fix("rollout.backend=sglang:d4t2", "actor.backend=fsdp:d8"),
            ),
        )
    groups: list[list[_Component]] = []
    for spans in _split(legacy):
        group: list[_Component] = []
        for start, end in spans:
            if legacy[start:end] in _EVAL_WORDS:
                if len(spans) > 1:
                    raise AllocationError(
                        f"'{legacy[start:end]}' cannot be colocated",
                        legacy,
                        start,
                        length=end - start,
                        hint="evaluation on CPU is written with '+', e.g. sglang:d4t2+eval",
                    )
                continue  # CPU evaluation: no engine, nothing to translate
            group.append(_component(legacy, start, end))
        if group:
            groups.append(group)
    return _assign(legacy, groups)


def _split(legacy: str) -> list[list[tuple[int, int]]]:
    """``+``-separated groups of ``|``-separated component spans (blanks stripped)."""
    depth = 0
    open_at: list[int] = []
    groups: list[list[tuple[int, int]]] = []
    group: list[tuple[int, int]] = []
    start = 0
    for i, ch in enumerate(legacy):
        if ch == "(":
            depth += 1
            open_at.append(i)
        elif ch == ")":
            if depth == 0:
                raise AllocationError(
                    "unbalanced parenthesis: ')' without '('",
                    legacy,
                    i,
                    hint="parentheses only enclose a hybrid layout, "
                    "e.g. megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
                )
            depth -= 1
            open_at.pop()
        elif depth == 0 and ch == "+":
            group.append(_span(legacy, start, i, "+"))
            groups.append(group)
            group = []
            start = i + 1
        elif depth == 0 and ch == "|" and not _FFN_AHEAD.match(legacy, i + 1):
            group.append(_span(legacy, start, i, "|"))
            start = i + 1
    if depth:
        raise AllocationError(
            "unbalanced parenthesis: '(' is never closed",
            legacy,
            open_at[-1],
            hint="close it after the ffn section, e.g. megatron:(attn:d4p2t2|ffn:e4)",
        )
    group.append(_span(legacy, start, len(legacy), None))
    groups.append(group)
    return groups


def _span(legacy: str, start: int, end: int, sep: str | None) -> tuple[int, int]:
    s, e = start, end
    while s < e and legacy[s] in _BLANKS:
        s += 1
    while e > s and legacy[e - 1] in _BLANKS:
        e -= 1
    if s == e:
        where = "before" if sep is not None else "after"
        around = sep if sep is not None else legacy[start - 1]
        raise AllocationError(
            f"empty component {where} '{around}'",
            legacy,
            end if sep is not None else start - 1,
            hint="'+' separates engines and '|' colocates engines, "
            "e.g. sglang:d4t2+fsdp:d8 or sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4",
        )
    return s, e


def _component(legacy: str, start: int, end: int) -> _Component:
    """Parse one component; its backend string goes through ``parse_backend``."""
    text = legacy[start:end]
    name: str | None = None
    name_pos = start
    # The per-engine spec is head + legacy[body_start:end]; head_pos gives the
    # position in ``legacy`` of each character of head.
    head = ""
    head_pos: list[int] = []
    body_start = start
    auto = False

    m = _HEADER.match(text)
    if m and not (m.group("backend") == "attn" and m.group("name") is None):
        if m.group("name") is not None:
            name, name_pos = _name(legacy, start + m.start("name"), start + m.end("name"))
        backend = m.group("backend")
        sep = m.group("sep")
        body_start = start + m.end()
        if backend is None:
            if sep != ":":
                raise AllocationError(
                    "expected ':' after the component name",
                    legacy,
                    start + m.start("sep"),
                    hint=f"write [{name}]:dims, or better name the backend too, "
                    f"e.g. fsdp[{name}]:d4",
                )
            auto = True
        else:
            if sep == "." and backend in INFERENCE_BACKENDS:
                sep = ":"  # the old dot form, e.g. sglang.d4p1t1
            b0 = start + m.start("backend")
            head = backend + sep
            head_pos = [*range(b0, b0 + len(backend)), start + m.start("sep")]
    elif _BARE_START.match(text):
        auto = True
    # Anything else (e.g. "fdsp", "FSDP d4") is no legacy form: the parser says what
    # is wrong with it.

    for bracket in "[]":
        at = legacy.find(bracket, body_start, end)
        if at >= 0:
            raise AllocationError(
                f"unexpected '{bracket}'",
                legacy,
                at,
                hint="a component name goes between the backend and ':', e.g. fsdp[critic]:d4",
            )

    # A '|' left in a component is inside parentheses: only the hybrid form's
    # "|ffn:" may be there (the parser would take any other '|' for colocation).
    bar = legacy.find("|", body_start, end)
    while bar >= 0:
        if not _FFN_AHEAD.match(legacy, bar + 1):
            raise AllocationError(
                "expected the section label 'ffn:' after '|' inside parentheses",
                legacy,
                bar + 1,
                hint="the hybrid form is (attn:<dims>|ffn:<dims>), "
                "e.g. megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
            )
        bar = legacy.find("|", bar + 1, end)

    body = legacy[body_start:end]
    if auto:
        head = _auto_backend(body) + ":"
        head_pos = [body_start] * len(head)
    positions = [*head_pos, *range(body_start, end), end]
    alloc = _parse(legacy, head + body, positions)
    if name is not None:
        _check_name(legacy, name, name_pos, alloc)
    return _Component(start, end, name, name_pos, alloc)


def _name(legacy: str, s: int, e: int) -> tuple[str, int]:
    while s < e and legacy[s] in _BLANKS:
        s += 1
    while e > s and legacy[e - 1] in _BLANKS:
        e -= 1
    if s == e:
        raise AllocationError(
            "empty component name",
            legacy,
            s,
            hint=f"name one of the engines {join_or(list(ENGINES))}, or leave out the brackets",
        )
    return legacy[s:e], s


def _auto_backend(body: str) -> str:
    """AReaL's old rule for training dims without a backend."""
    if "attn" in body or "ffn" in body:
        return "megatron"
    for letter, digits in _SIZED_DIM.findall(body):
        if letter in "pe" and int(digits) > 1:
            return "megatron"
    return "fsdp"


def _parse(legacy: str, spec: str, positions: list[int]) -> ModelAllocation:
    try:
        return parse(spec)
    except AllocationError as err:
        position = None
        length = err.length
        if err.position is not None:
            last_index = len(positions) - 1
            first = min(max(err.position, 0), last_index)
            last = min(max(err.position + err.length - 1, first), last_index)
            position = positions[first]
            length = max(1, positions[last] - position + 1)
        raise AllocationError(
            err.reason, legacy, position, length=length, hint=err.advice or err.hint
        ) from None


def _check_name(legacy: str, name: str, name_pos: int, alloc: ModelAllocation) -> None:
    inference = alloc.is_inference
    if name not in ENGINES:
        fitting = [e for e in ENGINES if (e in _INFERENCE_ENGINES) == inference]
        hint = f"component names are the engines {join_or(list(ENGINES))}"
        guess = _guess(name, fitting)
        if guess:
            hint += f"; did you mean {guess}?"
        raise AllocationError(
            f"unknown component name '{name}': not an engine",
            legacy,
            name_pos,
            length=len(name),
            hint=hint,
        )
    wanted = "inference" if name in _INFERENCE_ENGINES else "training"
    if (wanted == "inference") != inference:
        article = "an" if wanted == "inference" else "a"
        kind = "an inference" if inference else "a training"
        backends = [b for b, r in BACKENDS.items() if r.kind == wanted]
        raise AllocationError(
            f"'{name}' is {article} {wanted} engine but {alloc.backend} is {kind} backend",
            legacy,
            name_pos,
            length=len(name),
            hint=f"use {join_or(backends)} for '{name}'",
        )


def _guess(name: str, candidates: list[str]) -> str | None:
    low = name.lower()
    for cand in candidates:
        if cand.startswith(low) or low.startswith(cand):
            return cand
    close = difflib.get_close_matches(low, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def _assign(legacy: str, groups: list[list[_Component]]) -> list[_Entry]:
    """Name the unnamed components and work out the scheduling."""
    engine_of: dict[int, str] = {}  # id(component) -> engine
    explicit: set[str] = set()
    for comp in (c for group in groups for c in group):
        if comp.name is None:
            continue
        if comp.name in explicit:
            free = [e for e in ENGINES if e not in explicit]
            raise AllocationError(
                f"engine '{comp.name}' appears twice",
                legacy,
                comp.name_pos,
                length=len(comp.name),
                hint=f"each engine gets one component; name this one {join_or(free)}, or remove it",
            )
        explicit.add(comp.name)
        engine_of[id(comp)] = comp.name

    unnamed_training = 0
    for comp in (c for group in groups for c in group):
        if comp.name is not None:
            continue
        if comp.alloc.is_inference:
            if "rollout" in explicit:
                raise AllocationError(
                    "a second inference component: 'rollout' is the only inference engine",
                    legacy,
                    comp.start,
                    length=comp.end - comp.start,
                    hint="give the rollout engine one backend; remove one of the "
                    "inference components",
                )
            engine = "rollout"
        else:
            unnamed_training += 1
            if unnamed_training > 1 or "actor" in explicit:
                reason = (
                    "a second unnamed training component: only the first one is the actor"
                    if unnamed_training > 1
                    else "an unnamed training component, but 'actor' is named elsewhere"
                )
                named = str(comp.alloc).replace(":", "[critic]:", 1)
                raise AllocationError(
                    reason,
                    legacy,
                    comp.start,
                    length=comp.end - comp.start,
                    hint=f"name the engine it is for, e.g. {named} (critic, ref or teacher)",
                )
            engine = "actor"
        explicit.add(engine)
        engine_of[id(comp)] = engine

    entries: list[_Entry] = []
    for group in groups:
        first = group[0]
        first_engine = engine_of[id(first)]
        for comp in group[1:]:
            if comp.alloc.world_size != first.alloc.world_size:
                raise AllocationError(
                    f"'{engine_of[id(comp)]}' is colocated with '{first_engine}' but needs "
                    f"{comp.alloc.world_size} GPUs, not {first.alloc.world_size}",
                    legacy,
                    comp.start,
                    length=comp.end - comp.start,
                    hint="colocated engines share their target's GPUs, so their world "
                    "sizes (d×t×p×c) must be equal; or separate them with '+'",
                )
        # AReaL creates the engines in a fixed order and a colocation target must already
        # exist: the group shares the GPUs of its member that is created first.
        owner = min(group, key=lambda c: ROLE_NAMES.index(engine_of[id(c)]))
        owner_engine = engine_of[id(owner)]
        for comp in group:
            engine = engine_of[id(comp)]
            if comp is owner:
                # Said, not left to the default: the YAML the overrides go onto may
                # colocate this engine (AReaL's examples colocate ref with actor).
                entries.append(_Entry(engine, str(comp.alloc), "separation", None))
            else:
                entries.append(_Entry(engine, str(comp.alloc), "colocation", owner_engine))
    if not entries:
        raise AllocationError(
            "allocation_mode names no engine",
            legacy,
            hint="e.g. sglang:d4t2+fsdp:d8",
        )
    return entries


def _yaml_quote(value: str) -> str:
    """A YAML double-quoted scalar for any string (non-ASCII written as escapes)."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 32 <= code < 127:
            out.append(ch)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)

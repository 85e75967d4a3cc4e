"""How a user reads the fixes in a printed hint: the overrides of each option that is
nothing but overrides (after a lead-in such as "e.g." or "this would fit:", without
remarks in parentheses). areal-conf itself keeps its fixes as data
(:mod:`areal_conf.hints`); the tests that paste printed fixes back read them from the
text, as a user copies them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Final

#: One Hydra override as a hint writes it (not an environment variable: upper-case keys),
#: or a deletion (``~key``).
OVERRIDE: Final = re.compile(
    r"(\+\+|\+)?(?![A-Z0-9_]+=)[A-Za-z_][\w.]*=[^\s<>]+|~[A-Za-z_][\w.]*(?=$|[\s,;)])"
)
#: A remark in parentheses after a blank (a hybrid layout's parentheses follow a colon).
REMARK: Final = re.compile(r"\s\((?:[^()]|\([^()]*\))*\)")
#: What separates a hint's alternatives.
SEPARATOR: Final = re.compile(r"; or |, or |; | or ")
#: Words that lead into an alternative's overrides.
_LEAD_IN: Final = re.compile(r"^(or |e\.g\. |this would fit: )+")


@dataclass(frozen=True)
class Alternative:
    """One alternative of a hint that is nothing but overrides: the alternative's index
    among the hint's parts (between separators), where its overrides are written in that
    part (``start``, ``end``), and the overrides."""

    part: int
    start: int
    end: int
    overrides: tuple[str, ...]


def all_overrides(text: str) -> bool:
    return bool(text.split()) and all(OVERRIDE.fullmatch(t) for t in text.split())


def split_hint(hint: str) -> tuple[list[str], list[str]]:
    """The hint's parts and the separators between them (one fewer)."""
    parts: list[str] = []
    separators: list[str] = []
    begin = 0
    for match in SEPARATOR.finditer(hint):
        parts.append(hint[begin : match.start()])
        separators.append(match.group())
        begin = match.end()
    parts.append(hint[begin:])
    return parts, separators


def alternatives(hint: str) -> list[Alternative]:
    """The alternatives of ``hint`` that are fixes made of overrides: each part between
    separators that, without remarks in parentheses, a leading "or", "e.g." or "this
    would fit:", and a lead-in or an explanation around ": ", is nothing but
    ``key=value`` / ``+key=value`` / ``++key=value``."""
    found: list[Alternative] = []
    for index, part in enumerate(split_hint(hint)[0]):
        text = _LEAD_IN.sub("", REMARK.sub("", part).strip())
        lead, _, after = text.rpartition(": ")
        before = text.partition(": ")[0]
        if lead and all_overrides(after):
            text = after
        elif before != text and all_overrides(before):
            text = before
        try:
            tokens = tuple(shlex.split(text))
        except ValueError:  # an apostrophe in a sentence
            continue
        if not tokens or not all(OVERRIDE.fullmatch(t) for t in tokens):
            continue
        first = part.find(tokens[0])
        last = part.rfind(tokens[-1])
        if 0 <= first <= last:
            found.append(Alternative(index, first, last + len(tokens[-1]), tokens))
    return found

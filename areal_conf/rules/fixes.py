"""Every fix a message prints passes the whole check.

A hint offers its fixes as alternatives (``++enable_offload=true, or
rollout.scheduling_strategy.type=separation``); an alternative made only of overrides is
a fix a user pastes. Each rule writes its fix knowing its own condition, not the rest of
the config: separating two engines on a one-node cluster needs a second node, colocating
a rollout under AReaL 2.0 needs ``enable_offload``. :func:`checked_hint` tries each such
alternative on the config with the whole check and keeps what passes: an alternative that
passes as it is stays; one that meets another rule takes that rule's own fix along, when
the two together pass; one that passes with neither is left out. A hint whose every
alternative is refused says so, with the reason the first one meets.

No Hydra here: the caller applies overrides (``areal_conf.config.edits.with_overrides``)
and runs the check.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from areal_conf.errors import AllocationError

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

#: The check of a config with overrides applied: None when it passes, else its error.
FixCheck = Callable[[tuple[str, ...]], AllocationError | None]


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


@dataclass(frozen=True)
class CheckedHint:
    """A hint with its fixes checked: the text as printed, and each fix that passes the
    whole check as data (its overrides, as Hydra's command line takes them)."""

    text: str | None
    fixes: tuple[tuple[str, ...], ...] = ()


def checked_hint(hint: str | None, check: FixCheck) -> str | None:
    """``hint`` with each fix made of overrides checked by ``check`` (see the module's
    docstring): kept, completed with the fix of the rule it meets next, or left out."""
    return check_hint(hint, check).text


def check_hint(hint: str | None, check: FixCheck) -> CheckedHint:
    """:func:`checked_hint`, and the fixes that pass as data."""
    if not hint:
        return CheckedHint(hint)
    found = alternatives(hint)
    if not found:
        return CheckedHint(hint)
    parts, separators = split_hint(hint)
    dropped: list[int] = []
    passing: list[tuple[str, ...]] = []
    first_refusal: AllocationError | None = None
    for alternative in found:
        outcome = _passing(alternative.overrides, check)
        if isinstance(outcome, AllocationError):
            dropped.append(alternative.part)
            first_refusal = first_refusal or outcome
            continue
        passing.append(outcome)
        if outcome != alternative.overrides:
            part = parts[alternative.part]
            parts[alternative.part] = (
                part[: alternative.start] + " ".join(outcome) + part[alternative.end :]
            )
    if len(dropped) == len(found) and first_refusal is not None:
        return CheckedHint(
            f"{hint} (none of these passes the whole check here: {first_refusal.reason})"
        )
    kept = [i for i in range(len(parts)) if i not in dropped]
    text = parts[kept[0]]
    for i in kept[1:]:
        # the separator that led into this part (a dropped part before it takes its own)
        text += separators[i - 1] + parts[i]
    if kept[0] > 0:  # the first part left had followed a separator: "or X" reads "X"
        text = text.strip().removeprefix("or ")
    return CheckedHint(text, tuple(passing))


#: How many rules a fix may meet one after the other, each adding its own fix.
MAX_STEPS: Final = 3


def _passing(
    overrides: tuple[str, ...], check: FixCheck, steps: int = MAX_STEPS
) -> tuple[str, ...] | AllocationError:
    """``overrides`` if they pass; else with the fix of the rule they meet next (one of
    its hint's suggestions that sets no key ``overrides`` set), and so on for at most
    ``steps`` rules; else the error they meet first."""
    error = check(overrides)
    if error is None:
        return overrides
    if steps > 1:
        keys = {_key(o) for o in overrides}
        for more in _suggested(error.hint or ""):
            if any(_key(o) in keys for o in more):
                continue  # it would undo the fix (teacher.engine_type=rollout after =train)
            completed = _passing((*overrides, *more), check, steps - 1)
            if not isinstance(completed, AllocationError):
                return completed
    return error


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def _suggested(hint: str) -> list[tuple[str, ...]]:
    """Every change a hint suggests as overrides: its alternatives, then the overrides a
    sentence gives as an example (``add nodes (++cluster.n_nodes=2) or ...``)."""
    found = [alternative.overrides for alternative in alternatives(hint)]
    for part in split_hint(hint)[0]:
        written = tuple(_unwrapped(m.group()) for m in OVERRIDE.finditer(part))
        if written and written not in found:
            found.append(written)
    return found


def _unwrapped(override: str) -> str:
    """An override as a sentence quotes it, without the punctuation around it: a closing
    parenthesis that opened before it, a comma or a full stop."""
    text = override.rstrip(".,;")
    while text.endswith(")") and text.count(")") > text.count("("):
        text = text[:-1]
    return text

"""A message's hint as data: the fixes it offers are overrides, not words to find again.

A hint offers options, one after the other with the words between them (``", or "``):
a :class:`Fix` (overrides a user pastes, which the whole check tries on the config and
keeps only when they pass), a :class:`Sentence` (words with overrides quoted in them as
examples: ``add nodes (cluster.n_nodes=2)``), or plain words. Rendered, a hint reads
as it always has; its overrides can be spelled for a config (``++key=value`` where the
config lacks the key) and the fixes that fail can be left out, without reading the text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

#: How one override is written for the config at hand (``key=value`` → ``++key=value``).
Spelling: TypeAlias = Callable[[str], str]


def _as_written(override: str) -> str:
    return override


@dataclass(frozen=True)
class Fix:
    """A change to paste: ``overrides`` (``key=value``, ``++key=value``, ``~key``), with
    the words before (``lead``) and after them (``remark``); ``quoted``: each override
    printed as one word for a shell (a layout with parentheses in it)."""

    overrides: tuple[str, ...]
    lead: str = ""
    remark: str = ""
    quoted: bool = False

    def text(self, spell: Spelling = _as_written) -> str:
        words = [spell(o) for o in self.overrides]
        if self.quoted:
            # a deletion (~key) stays as a user writes it
            words = [w if w.startswith("~") else shell_quote(w) for w in words]
        return self.lead + " ".join(words) + self.remark


def fix(*overrides: str, lead: str = "", remark: str = "", quoted: bool = False) -> Fix:
    """A :class:`Fix` of ``overrides``."""
    return Fix(tuple(overrides), lead, remark, quoted)


@dataclass(frozen=True)
class Sentence:
    """Words with overrides quoted in them as examples (each a :class:`Fix` among the
    words): spelled for the config like a fix, offered to complete another fix, never
    left out."""

    parts: tuple[str | Fix, ...]

    def text(self, spell: Spelling = _as_written) -> str:
        return "".join(p if isinstance(p, str) else p.text(spell) for p in self.parts)


def sentence(*parts: str | Fix) -> Sentence:
    return Sentence(parts)


Option: TypeAlias = "str | Fix | Sentence"


@dataclass(frozen=True)
class Hint:
    """A hint: its ``options`` with the words between them (``separators``, one fewer),
    and words after the last (``tail``)."""

    options: tuple[Option, ...]
    separators: tuple[str, ...] = ()
    tail: str = ""

    def text(self, spell: Spelling = _as_written) -> str:
        words = [_option_text(self.options[0], spell)] if self.options else []
        for separator, option in zip(self.separators, self.options[1:], strict=True):
            words += [separator, _option_text(option, spell)]
        return "".join(words) + self.tail

    def __str__(self) -> str:
        return self.text()

    def spelled(self, spell: Spelling) -> Hint:
        """This hint with each override written by ``spell``."""
        return replace(self, options=tuple(_spelled(o, spell) for o in self.options))

    def fixes(self) -> Iterator[tuple[int, Fix]]:
        """The options that are fixes, with their indexes."""
        for index, option in enumerate(self.options):
            if isinstance(option, Fix):
                yield index, option

    def suggested(self) -> list[tuple[str, ...]]:
        """Every change the hint suggests as overrides: its fixes, then the examples its
        sentences quote."""
        found = [f.overrides for _, f in self.fixes()]
        for option in self.options:
            if isinstance(option, Sentence):
                for part in option.parts:
                    if isinstance(part, Fix) and part.overrides not in found:
                        found.append(part.overrides)
        return found

    def kept(self, indexes: list[int], changed: dict[int, Fix]) -> Hint:
        """The options at ``indexes`` (each with the separator that led into it), those in
        ``changed`` replaced; the first left, when it had followed a separator, without
        the "or " it began with."""
        options = [changed.get(i, self.options[i]) for i in indexes]
        if indexes and indexes[0] > 0:
            options[0] = _without_or(options[0])
        separators = tuple(self.separators[i - 1] for i in indexes[1:])
        return Hint(tuple(options), separators, self.tail)

    def then(self, separator: str, option: Option) -> Hint:
        """This hint with one more option after it."""
        if not self.options:
            return Hint((option,), (), self.tail)
        return Hint((*self.options, option), (*self.separators, separator), self.tail)

    def with_tail(self, tail: str) -> Hint:
        return replace(self, tail=self.tail + tail)

    def led(self, lead: str) -> Hint:
        """This hint with ``lead`` written before its first option (a fix's lead-in)."""
        if not self.options:
            return Hint((lead,), (), self.tail)
        return replace(self, options=(_led(self.options[0], lead), *self.options[1:]))


def either(*items: Option) -> Hint:
    """A hint of options and the words between them, alternately:
    ``either(fix("a=1"), ", or ", fix("b=2"))``."""
    return Hint(tuple(items[0::2]), tuple(str(s) for s in items[1::2]))


def as_hint(hint: str | Hint | Fix | Sentence) -> Hint:
    """``hint`` as a :class:`Hint` (words alone are one option)."""
    return hint if isinstance(hint, Hint) else Hint((hint,))


#: What a POSIX shell reads as one word without quotes.
_SHELL_SAFE: Final = re.compile(r"[A-Za-z0-9_@%+=:,./-]+", re.ASCII)
_DOUBLE_QUOTE_UNSAFE: Final = frozenset('"$`\\!')


def shell_quote(token: str) -> str:
    """``token`` as one word for a POSIX shell, quoted only when it needs to be."""
    if _SHELL_SAFE.fullmatch(token):
        return token
    if not any(ch in _DOUBLE_QUOTE_UNSAFE for ch in token):
        return f'"{token}"'
    return shlex.quote(token)


def _option_text(option: Option, spell: Spelling) -> str:
    return option if isinstance(option, str) else option.text(spell)


def _spelled(option: Option, spell: Spelling) -> Option:
    if isinstance(option, Fix):
        return replace(option, overrides=tuple(spell(o) for o in option.overrides))
    if isinstance(option, Sentence):
        return Sentence(
            tuple(
                p if isinstance(p, str) else replace(p, overrides=tuple(map(spell, p.overrides)))
                for p in option.parts
            )
        )
    return option


def _led(option: Option, lead: str) -> Option:
    if isinstance(option, Fix):
        return replace(option, lead=lead + option.lead)
    if isinstance(option, Sentence):
        return Sentence((lead, *option.parts))
    return lead + option


def _without_or(option: Option) -> Option:
    if isinstance(option, Fix):
        return replace(option, lead=option.lead.lstrip().removeprefix("or "))
    if isinstance(option, Sentence) and option.parts and isinstance(option.parts[0], str):
        first = option.parts[0].lstrip().removeprefix("or ")
        return Sentence((first, *option.parts[1:]))
    return option.strip().removeprefix("or ") if isinstance(option, str) else option

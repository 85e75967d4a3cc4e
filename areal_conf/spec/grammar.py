"""The grammar of one backend string: a scanner and a recursive-descent parser.

One left-to-right pass over the text, no recursion, so any input, a megabyte of it
included, is accepted or rejected in linear time. Every rejection is one
``AllocationError`` with the position of the offending characters and a hint that
states the fix. The sizes are checked by :mod:`areal_conf.spec.strategy`.

A string in the deprecated multi-engine ``allocation_mode`` syntax is only flagged
here (:class:`LegacySyntax`); :func:`areal_conf.spec.parser.parse_backend` adds the
translation, which needs :mod:`areal_conf.spec.legacy`, itself a user of this grammar.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

from areal_conf.errors import AllocationError, BackendSyntaxError
from areal_conf.spec import strategy
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import (
    ATTN_DIMS,
    BACKENDS,
    DIM_LETTERS,
    DIM_NAMES,
    FFN_DIMS,
    MAX_SIZE,
    BackendRule,
    backends_supporting,
    join_or,
)
from areal_conf.spec.strategy import ParallelStrategy, SizeProblem

_ASCII_DIGITS: Final = frozenset("0123456789")
_BLANKS: Final = frozenset(" \t")
_DIM_LETTERS: Final = frozenset(DIM_LETTERS)
_MAX_DIGITS: Final = len(str(MAX_SIZE))
_DIMS_EXAMPLE: Final = "dimensions are d (data), t (tensor), p (pipeline), c (context), e (expert)"

# A dimension as parsed: letter → (size, position of the letter, length of letter+size).
_Dims = dict[str, tuple[int, int, int]]


class LegacySyntax(BackendSyntaxError):
    """A string in the multi-engine ``allocation_mode`` syntax where one backend belongs.

    The hint says to give each engine its own backend; the public parser adds the
    translation to it.
    """


def parse(spec: str) -> ModelAllocation:
    """One backend string, e.g. ``fsdp:d4t2``, as a ModelAllocation."""
    return parse_fast(spec) or Parser(spec).parse()


# The fast path: blank-free valid specs, which is nearly every spec a program sees, are
# matched by one regular expression and checked with plain arithmetic. Possessive
# quantifiers over unambiguous tokens cannot backtrack, so a long input fails in linear
# time. Anything unusual (blanks, any error) returns None and goes to the full parser,
# the one authority for messages; tests check that both agree on every accepted input.
_FAST_SIZE: Final = f"[1-9][0-9]{{0,{_MAX_DIGITS - 1}}}"
_FAST_NAMES: Final = "|".join(BACKENDS)
_FAST_HYBRID_NAMES: Final = "|".join(name for name, rule in BACKENDS.items() if rule.hybrid)
_FAST_FLAT: Final = re.compile(rf"({_FAST_NAMES}):((?:[dtpce]{_FAST_SIZE})++)")
_FAST_HYBRID: Final = re.compile(
    rf"({_FAST_HYBRID_NAMES}):\((?:attn:)((?:[dtpc]{_FAST_SIZE})++)\|ffn:((?:[dtpe]{_FAST_SIZE})++)\)"
)
_FAST_DIM: Final = re.compile(r"([dtpce])([0-9]+)")


def parse_fast(spec: str) -> ModelAllocation | None:
    match = _FAST_FLAT.fullmatch(spec)
    if match is not None:
        backend, body = match.groups()
        sizes = _fast_sizes(body, BACKENDS[backend].dims)
        if sizes is None:
            return None
        get = sizes.get
        parallel = strategy.flat(get("d", 1), get("t", 1), get("p", 1), get("c", 1), get("e", 1))
    else:
        match = _FAST_HYBRID.fullmatch(spec)
        if match is None:
            return None
        backend, attn_body, ffn_body = match.groups()
        attn = _fast_sizes(attn_body, ATTN_DIMS)
        ffn = _fast_sizes(ffn_body, FFN_DIMS)
        if attn is None or ffn is None:
            return None
        get = attn.get
        parallel = strategy.hybrid(
            get("d", 1),
            get("t", 1),
            get("p", 1),
            get("c", 1),
            ffn_dp=ffn.get("d"),
            ffn_pp=ffn.get("p"),
            etp=ffn.get("t", 1),
            ep=ffn.get("e", 1),
        )
    if isinstance(parallel, SizeProblem) or (
        backend == "archon" and strategy.archon_problem(parallel) is not None
    ):
        return None
    return ModelAllocation(backend, parallel)


def _fast_sizes(body: str, supported: str) -> dict[str, int] | None:
    """Sizes of a syntactically valid dims body, or None when a rule needs a message."""
    pairs = _FAST_DIM.findall(body)
    sizes = {letter: int(digits) for letter, digits in pairs}
    if len(sizes) != len(pairs):
        return None  # duplicate dimension
    for letter, size in sizes.items():
        if size > MAX_SIZE or (size != 1 and letter not in supported):
            return None
    return sizes


class _Scanner:
    """Position-keeping reads over the text; every error points into it."""

    __slots__ = ("end", "pos", "spec")

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.pos = 0
        self.end = len(spec)

    def skip_blanks(self) -> None:
        spec, pos, end = self.spec, self.pos, self.end
        while pos < end and spec[pos] in _BLANKS:
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        """The next non-blank character, or '' at the end."""
        self.skip_blanks()
        return self.spec[self.pos] if self.pos < self.end else ""

    def fail(
        self, reason: str, position: int | None, *, length: int = 1, hint: str = ""
    ) -> AllocationError:
        return BackendSyntaxError(reason, self.spec, position, length=length, hint=hint)

    def expect(self, char: str, what: str, hint: str) -> None:
        found = self.peek()
        if found != char:
            raise self.unexpected(f"expected {what}", hint)
        self.pos += 1

    def unexpected(self, expected: str, hint: str) -> AllocationError:
        if self.pos >= self.end:
            return self.fail(f"{expected}, found the end of the string", self.end, hint=hint)
        return self.fail(f"{expected}, found {self.spec[self.pos]!r}", self.pos, hint=hint)

    def word(self) -> str:
        """A run of letters, digits, '_' or '-' at the current position (may be empty)."""
        spec, start, end = self.spec, self.pos, self.end
        pos = start
        while pos < end and (spec[pos].isalnum() or spec[pos] in "_-"):
            pos += 1
        self.pos = pos
        return spec[start:pos]


class Parser(_Scanner):
    """backend ":" (dims | ["("] "attn:" dims "|" "ffn:" dims [")"])"""

    __slots__ = ()

    def parse(self) -> ModelAllocation:
        spec = self.spec
        if not spec.strip(" \t"):
            raise self.fail(
                "empty backend string",
                None,
                hint="write <backend>:<dimensions>, e.g. fsdp:d8 or sglang:d2t4",
            )
        self.reject_legacy()
        self.skip_blanks()
        name_start = self.pos
        if self.peek() == "(":
            raise self.bare_dims(name_start)
        name = self.word()
        after = self.peek()
        if after == ":":
            if name == "attn":
                raise self.bare_dims(name_start)
            backend = self.backend_name(name, name_start)
            self.pos += 1
        elif after == ".":
            raise self.dot_form(name, name_start)
        elif _looks_like_dims(name):
            raise self.bare_dims(name_start)
        elif not name:
            raise self.fail(
                "expected a backend name such as fsdp or sglang",
                self.pos,
                hint="write <backend>:<dimensions>, e.g. fsdp:d8",
            )
        else:
            self.backend_name(name, name_start)  # raises for an unknown name: the better message
            raise self.unexpected(
                f"expected ':' after the backend name {name!r}",
                f"write {name}:<dimensions>, e.g. {name}:d8",
            )
        rule = BACKENDS[backend]
        head = self.peek()
        if head == "(" or (head == "a" and spec.startswith("attn", self.pos)):
            parallel, ffn = self.hybrid(backend, rule)
            dims = ffn  # Archon's rules point into the ffn section
        else:
            ffn = {}
            dims = self.dims(backend, rule.dims, section="")
            if not dims:
                raise self.unexpected(
                    f"missing dimensions after '{backend}:'",
                    f"give at least one dimension, e.g. {backend}:d8 ({_DIMS_EXAMPLE})",
                )
            parallel = self.flat(dims)
        if self.peek():
            if self.spec[self.pos] == ")":
                hint = "remove it"
                if rule.hybrid:
                    hint += f", or open the hybrid form with '(' as in {backend}:(attn:d4|ffn:e2)"
                raise self.fail("unmatched ')'", self.pos, hint=hint)
            raise self.unexpected("expected a dimension letter (d, t, p, c or e)", _DIMS_EXAMPLE)
        if backend == "archon":
            problem = strategy.archon_problem(parallel)
            if problem is not None:
                raise self.size_error(problem, dims, ffn)
        return ModelAllocation(backend, parallel)

    def backend_name(self, name: str, start: int) -> str:
        if name in BACKENDS:
            return name
        known = join_or(list(BACKENDS))
        if not name:
            raise self.fail(
                "missing backend name before ':'",
                start,
                hint=f"start with one of {known}, e.g. fsdp:d8",
            )
        # The suggestion keeps what follows from the ':' on ("fs dp:d4" -> fsdp:d4).
        colon = self.spec.find(":", self.pos)
        rest = _clip(self.spec[colon:].strip(" \t")) if colon >= 0 else ""
        if name.lower() in BACKENDS:
            hint = f"backend names are lower case: {name.lower()}{rest}"
        else:
            close = difflib.get_close_matches(name.lower(), list(BACKENDS), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}{rest}?" if close else f"known backends: {known}"
        raise self.fail(
            f"unknown backend {_clip(name)!r}", start, length=min(len(name), 40), hint=hint
        )

    def dot_form(self, name: str, start: int) -> AllocationError:
        dot = self.pos
        backend = name if name in BACKENDS else name.lower()
        fixed = _clip((self.spec[:dot] + ":" + self.spec[dot + 1 :]).strip(" \t"))
        if backend not in BACKENDS:
            return self.fail(
                f"unknown backend {_clip(name)!r}",
                start,
                length=min(max(1, len(name)), 40),
                hint=f"known backends: {join_or(list(BACKENDS))}",
            )
        return self.fail(
            "'.' between backend and dimensions is the old syntax",
            dot,
            hint=f"use ':' between backend and dimensions: {fixed}",
        )

    def bare_dims(self, start: int) -> AllocationError:
        body = _clip(self.spec.strip(" \t"))
        letters = {c for c in body if c in _DIM_LETTERS}
        is_hybrid = "(" in body or "attn" in body
        if is_hybrid or letters & {"p", "e"}:
            hint = f"name the backend, e.g. megatron:{body}"
        else:
            hint = f"name the backend, e.g. fsdp:{body} (training) or sglang:{body} (inference)"
        return self.fail("no backend prefix", start, hint=hint)

    def reject_legacy(self) -> None:
        """Multi-engine strings belong to the deprecated top-level allocation_mode."""
        spec = self.spec
        marker = -1
        for char in "+[":
            found = spec.find(char)
            if found >= 0 and (marker < 0 or found < marker):
                marker = found
        bar = spec.find("|")
        in_hybrid = "(" in spec[:bar] or spec[bar + 1 :].lstrip(" \t").startswith("ffn")
        if bar >= 0 and not in_hybrid:
            marker = bar if marker < 0 else min(marker, bar)
        if marker < 0:
            return
        raise LegacySyntax(
            "this is the deprecated allocation_mode syntax (several engines in one string)",
            spec,
            marker,
            hint="give each engine its own backend field",
        )

    def dims(self, backend: str, supported: str, section: str) -> _Dims:
        """dims := dim { dim }, stopping before anything that is not a dimension."""
        spec, end = self.spec, self.end
        dims: _Dims = {}
        while True:
            self.skip_blanks()
            start = self.pos
            if start >= end:
                return dims
            letter = spec[start]
            if letter not in _DIM_LETTERS:
                if letter in _ASCII_DIGITS:
                    raise self.fail(
                        "a size needs a dimension letter before it",
                        start,
                        hint=_DIMS_EXAMPLE,
                    )
                if letter.isalpha() and not spec.startswith(("attn", "ffn"), start):
                    lowered = letter.lower()
                    hint = (
                        f"dimension letters are lower case: {lowered}"
                        if lowered in _DIM_LETTERS
                        else _DIMS_EXAMPLE
                    )
                    raise self.fail(f"unknown dimension {letter!r}", start, hint=hint)
                return dims
            self.pos += 1
            size = self.size(letter)
            length = self.pos - start
            if letter in dims:
                raise self.fail(
                    f"duplicate dimension {letter!r} ({DIM_NAMES[letter]} parallelism)",
                    start,
                    length=length,
                    hint=f"give each dimension once, e.g. {letter}{size} "
                    "(AReaL silently kept the last one)",
                )
            # A backend tolerates an unsupported dimension of size 1 (AReaL configs such as
            # fsdp:d4p1t1); a hybrid section never does.
            if letter not in supported and (size != 1 or section):
                raise self.unsupported(backend, letter, start, length, section)
            dims[letter] = (size, start, length)

    def size(self, letter: str) -> int:
        self.skip_blanks()
        spec, start, end = self.spec, self.pos, self.end
        pos = start
        while pos < end and spec[pos] in _ASCII_DIGITS:
            pos += 1
        digits = spec[start:pos]
        if not digits:
            if start < end and spec[start].isdigit():
                raise self.fail(
                    f"{spec[start]!r} is not an ASCII digit",
                    start,
                    hint=f"write sizes with the digits 0-9, e.g. {letter}4",
                )
            raise self.unexpected(f"missing size after {letter!r}", f"give a size, e.g. {letter}4")
        if pos < end and spec[pos].isdigit():
            raise self.fail(
                f"{spec[pos]!r} is not an ASCII digit",
                pos,
                hint=f"write sizes with the digits 0-9, e.g. {letter}4",
            )
        self.pos = pos
        if digits[0] == "0":
            if len(digits) == 1 or not digits.strip("0"):
                raise self.fail(
                    f"{DIM_NAMES[letter]} size must be at least 1",
                    start,
                    length=len(digits),
                    hint=f"use {letter}1 or more, or leave the dimension out",
                )
            raise self.fail(
                f"size {digits!r} has a leading zero",
                start,
                length=len(digits),
                hint=f"write {letter}{digits.lstrip('0')}",
            )
        if len(digits) > _MAX_DIGITS or int(digits) > MAX_SIZE:
            raise self.fail(
                f"size {_shorten(digits)} is larger than the limit {MAX_SIZE} (2**20)",
                start,
                length=min(len(digits), 40),
                hint=f"use a size of at most {MAX_SIZE}",
            )
        return int(digits)

    def unsupported(
        self, backend: str, letter: str, start: int, length: int, section: str
    ) -> AllocationError:
        name = DIM_NAMES[letter]
        if section:
            # Only e (attn) and c (ffn) are refused by a section; the other one takes them.
            other = "ffn" if section == "attn" else "attn"
            return self.fail(
                f"{name} parallelism ({letter}) is not allowed in the {section} section",
                start,
                length=length,
                hint=f"put {letter} in the {other} section",
            )
        kind = BACKENDS[backend].kind
        able = [b for b in backends_supporting(letter) if BACKENDS[b].kind == kind]
        if able:
            body = _clip(self.spec[self.spec.index(":") + 1 :].strip(" \t"))
            hint = f"{name} parallelism needs {join_or(able)}, e.g. {able[0]}:{body}"
        else:
            hint = f"no {kind} backend supports it: leave {letter} out"
        return self.fail(
            f"{backend} does not support {name} parallelism ({letter})",
            start,
            length=length,
            hint=hint,
        )

    def flat(self, dims: _Dims) -> ParallelStrategy:
        sizes = strategy.flat(*(_size(dims, letter) for letter in DIM_LETTERS))
        if isinstance(sizes, SizeProblem):
            raise self.size_error(sizes, dims, {})
        return sizes

    def hybrid(self, backend: str, rule: BackendRule) -> tuple[ParallelStrategy, _Dims]:
        """The (attn|ffn) form; returns the layout and the ffn section's dims."""
        open_at = self.pos
        if not rule.hybrid:
            raise self.fail(
                f"{backend} does not support the hybrid (attn|ffn) form",
                open_at,
                hint="the hybrid form needs megatron or archon; "
                f"{backend} takes flat dimensions such as {backend}:d4t2",
            )
        parenthesised = self.spec[open_at] == "("
        if parenthesised:
            self.pos += 1
        example = f"{backend}:(attn:d4p2t2c2|ffn:d2p2t4e2)"
        self.section_label("attn", example)
        attn = self.dims(backend, ATTN_DIMS, section="attn")
        if not attn:
            raise self.unexpected("missing dimensions in the attn section", f"e.g. {example}")
        self.expect("|", "'|' between the attn and ffn sections", f"e.g. {example}")
        self.section_label("ffn", example)
        ffn_start = self.pos
        ffn = self.dims(backend, FFN_DIMS, section="ffn")
        if not ffn:
            raise self.unexpected("missing dimensions in the ffn section", f"e.g. {example}")
        if parenthesised:
            if self.peek() != ")":
                if self.pos >= self.end:
                    raise self.fail(
                        "unbalanced parenthesis: '(' is never closed",
                        open_at,
                        hint="add ')' at the end",
                    )
                raise self.unexpected("expected ')' after the ffn section", f"e.g. {example}")
            self.pos += 1
        return self.fold(attn, ffn, ffn_start), ffn

    def section_label(self, label: str, example: str) -> None:
        self.skip_blanks()
        start = self.pos
        word = self.word()
        if word != label:
            self.pos = start
            raise self.unexpected(f"expected the section label '{label}:'", f"e.g. {example}")
        self.expect(":", f"':' after '{label}'", f"e.g. {example}")

    def fold(self, attn: _Dims, ffn: _Dims, ffn_start: int) -> ParallelStrategy:
        """MoE parallel folding: derive and check the ffn layout against attn."""
        found_d, found_p = ffn.get("d"), ffn.get("p")
        sizes = strategy.hybrid(
            *(_size(attn, letter) for letter in ATTN_DIMS),
            ffn_dp=None if found_d is None else found_d[0],
            ffn_pp=None if found_p is None else found_p[0],
            etp=_size(ffn, "t"),
            ep=_size(ffn, "e"),
        )
        if isinstance(sizes, SizeProblem):
            ffn_span = (ffn_start, max(1, self.pos - ffn_start))
            raise self.size_error(sizes, {}, ffn, ffn_span)
        return sizes

    def size_error(
        self,
        problem: SizeProblem,
        flat: _Dims,
        ffn: _Dims,
        ffn_span: tuple[int, int] | None = None,
    ) -> AllocationError:
        """The error for a size rule, pointing where the problem says."""
        section, _, letter = problem.where.rpartition(".")
        found = (ffn if section else flat).get(letter)
        if found is not None:
            at, length = found[1], found[2]
        elif problem.where == "ffn" and ffn_span is not None:
            at, length = ffn_span
        else:
            at, length = None, 1
        return self.fail(problem.reason, at, length=length, hint=problem.hint)


def _size(dims: _Dims, letter: str) -> int:
    found = dims.get(letter)
    return 1 if found is None else found[0]


def _looks_like_dims(word: str) -> bool:
    """True for words such as d4t2: a dimension letter followed by a digit."""
    return len(word) >= 2 and word[0] in _DIM_LETTERS and word[1] in _ASCII_DIGITS


def _clip(text: str, limit: int = 60) -> str:
    """User text quoted in a message, cut so that a megabyte of input stays readable."""
    return text if len(text) <= limit else f"{text[: limit - 20]}…({len(text)} characters)"


def _shorten(digits: str) -> str:
    return digits if len(digits) <= 20 else f"{digits[:10]}… ({len(digits)} digits)"

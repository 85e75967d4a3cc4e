"""The checks of a public function's arguments, stated once.

Every public function of areal-conf (``areal_conf.__all__``, ``areal_conf.perf.memory.estimate``,
``areal_conf.model.shape.model_shape``, ...) checks its arguments with these at its
boundary, before any arithmetic: whatever it is given (a wrong type, None, a bool where a
number belongs, NaN, an infinity, a negative, zero, a number beyond any real input), it
returns a sane result or raises one :class:`AllocationError` that names the argument,
shows the value and says what to give instead.

The limits, and why they are where they are:

- a number of GPUs or a parallel size: at most :data:`MAX_SIZE` (2**20), the limit of
  the backend grammar (:mod:`areal_conf.spec.backends`);
- a number of tokens, sequences or rollouts: at most :data:`MAX_TOKENS` (2**40, about
  10^12). The largest real values are a step's tokens (Llama 3 trained on 16M-token
  steps) and a context (1M tokens); below the limit the models' arithmetic stays exact
  in floating point.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final, Required, TypedDict, Unpack

from areal_conf.errors import AllocationError, ConfigError

#: The most tokens (or sequences, or rollouts) an argument may give; see the module
#: docstring.
MAX_TOKENS: Final = 2**40

_SHOWN: Final = 60  # characters of a value's repr a message quotes


def shown(value: object) -> str:
    """``repr(value)``, shortened to :data:`_SHOWN` characters for a message."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__: name the type instead
        return f"a {type(value).__name__}"
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 15] + f"... ({len(text):,} characters)"
    return text


def limit(value: int) -> str:
    """``1,048,576 (2**20)`` for a power of two, else ``1,000``."""
    if value > 2 and value & (value - 1) == 0:
        return f"{value:,} (2**{value.bit_length() - 1})"
    return f"{value:,}"


class WholeBounds(TypedDict, total=False):
    """What :func:`whole` and :func:`optional_whole` take besides the name and value."""

    example: Required[str]  # completes the hint: ``e.g. 16384``
    minimum: int  # 1 unless given
    maximum: int  # MAX_TOKENS unless given
    why: str  # why ``maximum`` is the limit, said when a value above it is refused


def whole(name: str, value: object, **bounds: Unpack[WholeBounds]) -> int:
    """``value`` when it is an ``int`` (not a bool) from ``minimum`` to ``maximum``."""
    example, why = bounds["example"], bounds.get("why", "")
    minimum, maximum = bounds.get("minimum", 1), bounds.get("maximum", MAX_TOKENS)
    if type(value) is int and minimum <= value <= maximum:
        return value
    if type(value) is int and value > maximum:
        raise ConfigError(
            f"{name} must be at most {limit(maximum)}"
            + (f" ({why})" if why else "")
            + f", got {shown(value)}",
            hint=f"give a whole number of at most {limit(maximum)}; {example}",
        )
    what = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
    above = "above 0" if minimum == 1 else f"of {minimum} or more"
    raise ConfigError(
        f"{name} must be {what}, got {shown(value)}",
        hint=f"give a whole number {above}, at most {limit(maximum)}; {example}",
    )


def optional_whole(name: str, value: object, **bounds: Unpack[WholeBounds]) -> int | None:
    """:func:`whole`, or None for None."""
    return None if value is None else whole(name, value, **bounds)


def positive(name: str, value: object, *, example: str) -> float:
    """``value`` as a float when it is a finite number above 0 (an int or float, not a
    bool)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value) if abs(value) < 2**1000 else math.inf
        if math.isfinite(number) and number > 0:
            return number
    raise ConfigError(
        f"{name} must be a finite number above 0, got {shown(value)}",
        hint=f"give a number above 0, {example}",
    )


def fraction(name: str, value: object, *, example: str) -> float:
    """``value`` as a float when it is a number in (0, 1]."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1:
        return float(value)
    raise ConfigError(
        f"{name} must be a number above 0 and at most 1, got {shown(value)}",
        hint=f"give a fraction, {example}",
    )


def flag(name: str, value: object) -> bool:
    """``value`` when it is True or False."""
    if isinstance(value, bool):
        return value
    raise ConfigError(
        f"{name} must be True or False, got {shown(value)}",
        hint=f"give {name}=True or {name}=False",
    )


def optional_flag(name: str, value: object) -> bool | None:
    """:func:`flag`, or None for None (the function's default)."""
    return None if value is None else flag(name, value)


def choice(name: str, value: object, options: Iterable[str], *, hint: str = "") -> str:
    """``value`` when it is one of the strings ``options``."""
    names = list(options)
    if isinstance(value, str) and value in names:
        return value
    listed = ", ".join(repr(o) for o in names)
    raise AllocationError(
        f"{name} must be one of {listed}, got {shown(value)}",
        value if isinstance(value, str) else None,
        hint=hint or f"give one of {listed}",
    )


def text(name: str, value: object, *, example: str) -> str:
    """``value`` when it is a string."""
    if isinstance(value, str):
        return value
    raise ConfigError(
        f"{name} must be a string, got {type(value).__name__} {shown(value)}",
        hint=f"give a string, {example}",
    )


def optional_path(name: str, value: object, *, example: str) -> str | None:
    """``value`` as a string when it is a string or a path (``os.PathLike``), or None."""
    if value is None:
        return None
    if isinstance(value, str | os.PathLike) and _is_text(value):
        return str(os.fspath(value))
    raise ConfigError(
        f"{name} must be a path or None, got {type(value).__name__} {shown(value)}",
        hint=f"give a directory, {example}",
    )


def mapping(name: str, value: object, *, example: str) -> Mapping[Any, Any]:
    """``value`` when it is a mapping (a dict, an OmegaConf DictConfig, ...)."""
    if isinstance(value, Mapping):
        return value
    raise ConfigError(
        f"{name} must be a mapping, got {type(value).__name__} {shown(value)}",
        hint=f"give a dict, {example}",
    )


def _is_text(value: object) -> bool:
    return isinstance(value, str) or (
        isinstance(value, os.PathLike) and isinstance(os.fspath(value), str)
    )


def strings(name: str, value: object, *, example: str) -> list[str]:
    """``value`` as a list of strings when it is a list or tuple of strings (or paths)."""
    if isinstance(value, list | tuple) and all(_is_text(v) for v in value):
        return [str(os.fspath(v)) for v in value]
    bad = next(v for v in value if not _is_text(v)) if isinstance(value, list | tuple) else value
    raise ConfigError(
        f"{name} must be a list of strings, got {shown(value)}"
        + (f" (holding {shown(bad)})" if bad is not value else ""),
        hint=f"give a list of strings, {example}",
    )

"""Hydra overrides written so that a shell and Hydra's override grammar read them back.

Everything this project prints for a user to paste (migrations, sweeps) goes through
here. No Hydra import: the tests check the results with Hydra's own parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from areal_conf.errors import AllocationError
from areal_conf.hints import shell_quote


def format_overrides(overrides: Sequence[str]) -> str:
    """One shell line of Hydra overrides, each escaped for POSIX sh and for Hydra.

    ``key=value`` items whose value Hydra reads back as the same string without
    quotes stay as they are (``rollout.backend=sglang:d4t2``); other values are put
    in Hydra single quotes and the item in shell quotes
    (``"actor.backend='megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)'"``).  After the shell
    has split the line, Hydra's override parser yields each original key and value.
    Keys may carry Hydra's ``+``/``++`` prefix.
    """
    if isinstance(overrides, str):
        raise AllocationError(
            "format_overrides expects a list of overrides, not a string",
            overrides,
            hint="pass e.g. ['rollout.backend=sglang:d4t2', 'actor.backend=fsdp:d8']",
        )
    return " ".join(_format_override(item) for item in overrides)


_KEY = re.compile(r"(?:\+\+|\+)?[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*", re.ASCII)
# Values Hydra's override grammar reads back unchanged, as a string, without quotes.
_PLAIN_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_:./-]*", re.ASCII)
_HYDRA_WORDS = frozenset({"null", "true", "false", "inf", "nan"})
_QUOTE_BACKSLASHES = re.compile(r"(\\*)'")
_TRAILING_BACKSLASHES = re.compile(r"(\\+)$")


def _format_override(item: object) -> str:
    if not isinstance(item, str) or "=" not in item:
        raise AllocationError(
            "an override must be a string key=value",
            item,
            hint="e.g. rollout.backend=sglang:d4t2",
        )
    key, value = item.split("=", 1)
    if not _KEY.fullmatch(key):
        raise AllocationError(
            "not a Hydra config key",
            item,
            0,
            length=len(key),
            hint="keys are dotted names, e.g. actor.scheduling_strategy.type",
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        bad = next(i for i, ch in enumerate(value) if ord(ch) < 32 or ord(ch) == 127)
        raise AllocationError(
            "a control character cannot be written on one shell line",
            item,
            len(key) + 1 + bad,
            hint="remove line breaks and tabs from the value",
        )
    return shell_quote(f"{key}={hydra_value(value)}")


def shell_line(overrides: Sequence[str]) -> str:
    """Overrides already written for Hydra's grammar (e.g. those of
    ``migrate_allocation_mode``), quoted for a POSIX shell and joined into one line."""
    return " ".join(shell_quote(item) for item in overrides)


def _hydra_quote(value: str) -> str:
    """A Hydra single-quoted string: backslashes are escaped only before a quote."""
    inner = _QUOTE_BACKSLASHES.sub(lambda m: m.group(1) * 2 + "\\'", value)
    inner = _TRAILING_BACKSLASHES.sub(lambda m: m.group(1) * 2, inner)
    return f"'{inner}'"


def hydra_unquoted(text: str) -> str | None:
    """The string a quoted value of Hydra's override grammar stands for (``'…'`` or
    ``"…"``: a backslash is an escape only before the quote, or doubled before one or at
    the end); None when ``text`` is not quoted."""
    if len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0]:
        return None
    quote = text[0]
    inner = re.sub(
        r"(\\*)\\" + quote, lambda m: m.group(1)[: len(m.group(1)) // 2] + quote, text[1:-1]
    )
    return re.sub(r"(\\+)$", lambda m: m.group(1)[: len(m.group(1)) // 2], inner)


def hydra_value(value: str) -> str:
    """``value`` written for Hydra's override grammar: plain when Hydra reads it back as
    the same string, else in Hydra single quotes (hybrid layouts: ``'megatron:(…|…)'``)."""
    if _PLAIN_VALUE.fullmatch(value) and value.lower() not in _HYDRA_WORDS:
        return value
    return _hydra_quote(value)


def sweep_override(key: str, values: Sequence[str]) -> str:
    """One Hydra multirun override ``key=v1,v2,…``, each value escaped for Hydra.

    Hydra's override parser reads it back as a choice sweep of exactly ``values`` (one
    value: a plain override). Not quoted for a shell: see :func:`shell_sweep_override`.
    """
    if isinstance(values, str) or not values:
        raise AllocationError(
            "a sweep needs a non-empty list of values",
            values if isinstance(values, str) else None,
            hint="e.g. sweep_override('actor.backend', ['fsdp:d8', 'fsdp:d4t2'])",
        )
    return f"{key}=" + ",".join(hydra_value(v) for v in values)


def shell_sweep_override(key: str, values: Sequence[str]) -> str:
    """:func:`sweep_override` quoted for a POSIX shell, ready to paste after ``-m``."""
    return shell_quote(sweep_override(key, values))

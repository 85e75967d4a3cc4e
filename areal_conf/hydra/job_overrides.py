"""A sweep job's overrides as Hydra's sweeper hands them over (``actor.backend=fsdp\\:d8``),
turned back into what the user typed: for the AReaL command a job runs and for the lines
that name a job. Imports Hydra's override parser when called."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from areal_conf.hints import shell_quote


def user_override(override: str) -> str:
    """Undo the escaping Hydra's sweeper adds to plain string values where it is not
    needed (``actor.backend=fsdp\\:d8`` -> ``actor.backend=fsdp:d8``). Anything else is
    returned as it is: it is already valid override syntax. A deletion the sweeper wrote
    out as ``~key=null`` (the same deletion to Hydra) is ``~key``, as typed."""
    if override.startswith("~") and override.endswith("=null"):
        return override.removesuffix("=null")
    if "\\" not in override or "=" not in override:
        return override
    parser = _override_parser()
    try:
        value = parser.parse_override(override)._value
        if not isinstance(value, str):
            return override
        candidate = override[: override.index("=") + 1] + value
        if parser.parse_override(candidate)._value == value:
            return candidate
    except Exception:  # display only: keep Hydra's own form
        pass
    return override


def job_overrides_line(overrides: Sequence[str]) -> str:
    """A job's overrides as the user would type them on a POSIX shell command line."""
    if not overrides:
        return "(no overrides)"
    return " ".join(shell_quote(user_override(o)) for o in overrides)


@functools.cache
def _override_parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()

"""``parse_backend``: one engine's backend string as a ModelAllocation.

The grammar is :mod:`areal_conf.grammar`'s. A string in the deprecated multi-engine
``allocation_mode`` syntax is rejected there; this module adds to that error the
per-engine overrides that replace it, from :mod:`areal_conf.legacy`.
"""

from __future__ import annotations

from areal_conf.allocation import ModelAllocation
from areal_conf.errors import AllocationError
from areal_conf.grammar import LegacySyntax, Parser, parse_fast
from areal_conf.legacy import migrate_allocation_mode
from areal_conf.overrides import shell_line

__all__ = ["parse_backend"]


def parse_backend(spec: object) -> ModelAllocation:
    """Parse one engine's backend string, e.g. ``fsdp:d4t2``, into a ModelAllocation."""
    if type(spec) is not str:
        raise _not_a_string(spec)
    return parse_fast(spec) or _parse_slow(spec)


def _parse_slow(spec: str) -> ModelAllocation:
    try:
        return Parser(spec).parse()
    except LegacySyntax as err:
        raise _with_translation(err) from None


def _with_translation(err: LegacySyntax) -> AllocationError:
    try:
        translation = shell_line(migrate_allocation_mode(str(err.spec)))
    except AllocationError:
        translation = ""
    hint = err.hint + (f"; as overrides: {translation}" if translation else "")
    return AllocationError(err.reason, err.spec, err.position, length=err.length, hint=hint)


def _not_a_string(spec: object) -> AllocationError:
    kind = type(spec).__name__
    if isinstance(spec, int) and not isinstance(spec, bool):
        hint = f'quote it and name the backend, e.g. backend: "fsdp:d{spec}"'
    else:
        hint = 'write a string such as "fsdp:d8" or "sglang:d2t4"'
    return AllocationError(f"backend must be a string, got {kind}", spec, None, hint=hint)

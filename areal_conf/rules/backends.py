"""Each engine's backend string, parsed, and its kind (inference or training) against its
role's: AReaL parses every backend when it starts, and refuses a role a backend of the
other kind."""

from __future__ import annotations

from areal_conf.rules.context import Context
from areal_conf.rules.engines import check_kind_of, parse_engines


def parse_all(ctx: Context, *, check_kinds: bool) -> None:
    ctx.engines = parse_engines(ctx.run, check_kinds=check_kinds)


def check_kinds(ctx: Context) -> None:
    for e in ctx.built():
        check_kind_of(e, ctx.run.engines[e.name])


def check_backends_and_kinds(ctx: Context) -> None:
    """AReaL 1.0: each backend string and its kind, engine by engine."""
    parse_all(ctx, check_kinds=True)


def check_backends(ctx: Context) -> None:
    """AReaL 2.0: each backend string (the kinds are checked later, where 2.0 meets them)."""
    parse_all(ctx, check_kinds=False)

"""``parse_backend``: one engine's backend string as a ModelAllocation.

The grammar is :mod:`areal_conf.spec.grammar`'s. A string in the deprecated multi-engine
``allocation_mode`` syntax is rejected there; this module adds to that error the
per-engine overrides that replace it, from :mod:`areal_conf.spec.legacy`.
"""

from __future__ import annotations

from areal_conf.errors import AllocationError, BackendSyntaxError, ConfigError, container_said
from areal_conf.hints import as_hint, fix
from areal_conf.spec.allocation import ModelAllocation, ParallelStrategy
from areal_conf.spec.backends import BACKENDS, join_or
from areal_conf.spec.grammar import LegacySyntax, Parser, parse_fast
from areal_conf.spec.legacy import check_teacher_layout, migrate_allocation_mode

__all__ = ["parse_backend"]


def parse_backend(spec: object, *, teacher_layout: str | None = None) -> ModelAllocation:
    """Parse one engine's backend string, e.g. ``fsdp:d4t2``, into a ModelAllocation.

    A string in the ``allocation_mode`` syntax is an error whose hint translates it, a
    teacher in ``teacher_layout`` (``flat``: AReaL 1.0's ``teacher.backend``; ``nested``:
    2.0's ``teacher.train``); by default in the layout of the AReaL rules in force
    (``AREAL_CONF_AREAL_VERSION``, the installed ``areal``, else the newest)."""
    if type(spec) is not str:
        raise _not_a_string(spec)
    if teacher_layout is not None:
        check_teacher_layout(teacher_layout)
    return parse_fast(spec) or _parse_slow(spec, teacher_layout)


def as_allocation(value: object) -> ModelAllocation:
    """The allocation argument of a public function: a :class:`ModelAllocation` (its
    backend known, its layout a :class:`ParallelStrategy`) or a backend string, parsed."""
    if not isinstance(value, ModelAllocation):
        return parse_backend(value)
    if not isinstance(value.backend, str) or value.backend not in BACKENDS:
        raise ConfigError(
            f"unknown backend {value.backend!r} in {type(value).__name__}",
            hint=f"build it with ModelAllocation.from_str(...); backends are "
            f"{join_or(list(BACKENDS))}",
        )
    if not isinstance(value.parallel, ParallelStrategy):
        raise ConfigError(
            f"the layout of a ModelAllocation must be a ParallelStrategy, "
            f"got {type(value.parallel).__name__}",
            hint=f'build it with ModelAllocation.from_str("{value.backend}:d8")',
        )
    return value


def _parse_slow(spec: str, teacher_layout: str | None) -> ModelAllocation:
    try:
        return Parser(spec).parse()
    except LegacySyntax as err:
        raise _with_translation(err, teacher_layout) from None


def _with_translation(err: LegacySyntax, teacher_layout: str | None) -> AllocationError:
    from areal_conf.areal.versions import teacher_layout as layout_in_force

    layout = teacher_layout or layout_in_force()
    hint = as_hint(err.advice or err.hint)
    try:
        translation = migrate_allocation_mode(str(err.spec), teacher_layout=layout)
    except AllocationError:
        translation = []
    if translation:
        hint = hint.then("; ", fix(*translation, lead="as overrides: ", quoted=True))
    spec = str(err.spec)
    return BackendSyntaxError(err.reason, spec, err.position, length=err.length, hint=hint)


def _not_a_string(spec: object) -> AllocationError:
    return not_a_backend_string(spec)


def not_a_backend_string(
    spec: object, key: str | None = None, example: str = "fsdp:d8"
) -> AllocationError:
    """The error for a backend that is not a string (a number, a list, a section, true,
    null where a backend is needed): what was found and, with the config ``key`` it came
    from, the override that writes a backend string there (``example``)."""
    if isinstance(spec, bool):
        found = f"{str(spec).lower()} (a boolean)"
    elif isinstance(spec, int | float):
        found = f"a number ({type(spec).__name__})"
    else:
        found = container_said(spec) or type(spec).__name__
    if isinstance(spec, int) and not isinstance(spec, bool) and spec > 0:
        example = f"{example.partition(':')[0]}:d{spec}"  # "8" meant 8 GPUs, most likely
    where = f"{key}: " if key else ""
    error = AllocationError(
        f"{where}backend must be a string, got {found}",
        spec,
        hint=fix(f"{key}={example}", lead="e.g. ", remark=" (a backend string)")
        if key
        else f'e.g. backend: "{example}" (a backend string)',
    )
    error.key = key
    return error

"""Every fix a message prints passes the whole check.

A hint (:class:`areal_conf.hints.Hint`) offers its options one after the other
(``++enable_offload=true, or rollout.scheduling_strategy.type=separation``); an option
that is a :class:`~areal_conf.hints.Fix` is overrides a user pastes. Each rule writes its
fix knowing its own condition, not the rest of the config: separating two engines on a
one-node cluster needs a second node, colocating a rollout under AReaL 2.0 needs
``enable_offload``. :func:`check_hint` tries each fix on the config with the whole check
and keeps what passes: a fix that passes as it is stays; one that meets another rule takes
that rule's own fix along, when the two together pass; one that passes with neither is
left out. A hint whose every fix is refused says so, with the reason the first one meets.

No Hydra here: the caller applies overrides (``areal_conf.config.edits.with_overrides``)
and runs the check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from areal_conf.errors import AllocationError
from areal_conf.hints import Fix, Hint

#: The check of a config with overrides applied: None when it passes, else its error.
FixCheck = Callable[[tuple[str, ...]], AllocationError | None]


@dataclass(frozen=True)
class CheckedHint:
    """A hint with its fixes checked: the hint as it will be printed, and each fix that
    passes the whole check as data (its overrides, as Hydra's command line takes them)."""

    hint: Hint | None
    fixes: tuple[tuple[str, ...], ...] = ()


def check_hint(hint: Hint | None, check: FixCheck) -> CheckedHint:
    """``hint`` with each fix checked by ``check`` (see the module's docstring): kept,
    completed with the fix of the rule it meets next, or left out."""
    found = list(hint.fixes()) if hint is not None else []
    if hint is None or not found:
        return CheckedHint(hint)
    dropped: list[int] = []
    changed: dict[int, Fix] = {}
    passing: list[tuple[str, ...]] = []
    first_refusal: AllocationError | None = None
    for index, offered in found:
        outcome = _passing(offered.overrides, check)
        if isinstance(outcome, AllocationError):
            dropped.append(index)
            first_refusal = first_refusal or outcome
            continue
        passing.append(outcome)
        if outcome != offered.overrides:
            changed[index] = replace(offered, overrides=outcome)
    if len(dropped) == len(found) and first_refusal is not None:
        return CheckedHint(
            hint.with_tail(f" (none of these passes the whole check here: {first_refusal.reason})")
        )
    kept = [i for i in range(len(hint.options)) if i not in dropped]
    return CheckedHint(hint.kept(kept, changed), tuple(passing))


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
    if steps > 1 and error.advice is not None:
        keys = {_key(o) for o in overrides}
        for more in error.advice.suggested():
            if any(_key(o) in keys for o in more):
                continue  # it would undo the fix (teacher.engine_type=rollout after =train)
            completed = _passing((*overrides, *more), check, steps - 1)
            if not isinstance(completed, AllocationError):
                return completed
    return error


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")

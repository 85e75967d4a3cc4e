"""The engine roles AReaL knows, in one table: every rule about a role reads it.

Five roles have fixed names (any other config section with a ``backend`` is an extra
engine whose kind follows from its backend). AReaL creates their engines in the order
of :data:`ROLES`.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Role(NamedTuple):
    name: str
    kind: str  # "inference" or "training"
    empty_backend: str  # "error", "inherit" (actor.backend) or "disable"
    example: str  # a backend for hints
    # Has an optimizer unless its config says ``optimizer: null`` (the memory estimate).
    trains: bool


#: The roles, in the order AReaL creates their engines.
ROLES: Final[tuple[Role, ...]] = (
    Role("actor", "training", "error", "fsdp:d8", trains=True),
    Role("critic", "training", "inherit", "fsdp:d8", trains=True),
    Role("ref", "training", "inherit", "fsdp:d8", trains=False),
    Role("teacher", "training", "disable", "fsdp:d8", trains=False),
    Role("rollout", "inference", "error", "sglang:d2t4", trains=False),
)
ROLE: Final[dict[str, Role]] = {role.name: role for role in ROLES}
#: Role names in creation order.
ROLE_NAMES: Final[tuple[str, ...]] = tuple(ROLE)
#: The role whose backend an empty "inherit" backend takes, and whose kl_ctl decides ref.
INHERIT_FROM: Final = "actor"
#: The role that AReaL builds only for a positive ``actor.kl_ctl``.
KL_ROLE: Final = "ref"
SCHEDULING_TYPES: Final = ("separation", "colocation")
#: AReaL 2.0's teacher layouts: the values of ``teacher.engine_type``, each the key of the
#: teacher's subsection (``teacher.rollout``), the first the default.
TEACHER_LAYOUTS: Final = ("rollout", "train")
#: Top-level keys besides engine sections that make a config an AReaL config.
LEGACY_KEY: Final = "allocation_mode"
#: What an engine section's ``allocation`` node is: derived from its backend by the
#: ``areal.allocation`` resolver when read.
ALLOCATION_NODE: Final = "${areal.allocation:}"


def example_backend(name: str, kind: str | None = None) -> str:
    """A backend to show in a hint for engine ``name``: its role's, unless ``kind`` says
    the engine is of another kind (a 2.0 inference teacher); an extra engine's is of
    ``kind`` (training when not given)."""
    role = ROLE.get(name)
    if role is not None and kind in (None, role.kind):
        return role.example
    return example_of_kind(kind or "training")


def example_of_kind(kind: str) -> str:
    """A backend of ``kind`` (inference or training) to show in a hint."""
    return next(r.example for r in ROLES if r.kind == kind)


def display_order(names: list[str]) -> list[str]:
    """Roles first (inference before training, then creation order), extras as given.

    Plans, tables and placement use this order: the rollout engine takes the first GPUs.
    """
    roles = sorted(
        (n for n in names if n in ROLE),
        key=lambda n: (ROLE[n].kind != "inference", ROLE_NAMES.index(n)),
    )
    return roles + [n for n in names if n not in ROLE]

"""Every fix a message prints passes the whole check: a hint's override alternatives,
tried (areal_conf.rules.fixes). The catalogue-wide test is tests/test_docs.py's; these rows
pin the rewriting on a stand-in check."""

from __future__ import annotations

import pytest

from areal_conf.errors import AllocationError
from areal_conf.rules.fixes import alternatives, checked_hint


def needs(*wanted: str, hint: str = "") -> AllocationError:
    return AllocationError(f"needs {' '.join(wanted)}", None, None, hint=hint)


def check(overrides: tuple[str, ...]) -> AllocationError | None:
    """A stand-in for the whole check: separating needs a second node; colocating needs
    offload, and offload needs the disk weight update; the teacher needs train."""
    given = set(overrides)
    if (
        "rollout.scheduling_strategy.type=separation" in given
        and "++cluster.n_nodes=2" not in given
    ):
        return needs("nodes", hint="add nodes (++cluster.n_nodes=2) or shrink an engine's layout")
    if "rollout.scheduling_strategy.target=actor" in given:
        if "++enable_offload=true" not in given:
            return needs("offload", hint="++enable_offload=true, or something else")
        if "++actor.weight_update_mode=disk" not in given:
            return needs("disk", hint="++actor.weight_update_mode=disk")
    if "teacher.engine_type=train" in given:
        return needs("a section", hint="teacher.engine_type=rollout")
    if "x=1" in given:
        return needs("nothing known", hint="read the docs")
    return None


@pytest.mark.parametrize(
    ("hint", "checked"),
    [
        # passes as it is: unchanged, remarks and lead-ins included
        (
            "this would fit: a.b=1 (GB per GPU: actor 70)",
            "this would fit: a.b=1 (GB per GPU: actor 70)",
        ),
        # meets one rule: takes that rule's fix, found in a sentence's example
        (
            "++enable_offload=true, or rollout.scheduling_strategy.type=separation",
            "++enable_offload=true, or rollout.scheduling_strategy.type=separation ++cluster.n_nodes=2",
        ),
        # meets two rules one after the other
        (
            "rollout.scheduling_strategy.target=actor (did you mean actor?)",
            "rollout.scheduling_strategy.target=actor ++enable_offload=true "
            "++actor.weight_update_mode=disk (did you mean actor?)",
        ),
        # a fix that would undo the alternative (the same key) is not taken: left out
        (
            "teacher.engine_type=rollout (the default) or teacher.engine_type=train",
            "teacher.engine_type=rollout (the default)",
        ),
        ("x=1 or a.b=2", "a.b=2"),
        # none passes: said, with the reason the first meets
        ("x=1", "x=1 (none of these passes the whole check here: needs nothing known)"),
        # prose, or no hint: nothing to try
        ("shrink an engine's layout", "shrink an engine's layout"),
        (None, None),
    ],
)
def test_checked_hint(hint: str | None, checked: str | None) -> None:
    assert checked_hint(hint, check) == checked


@pytest.mark.parametrize(
    ("hint", "fixes"),
    [
        ("a.b=1 or ++c=2", [("a.b=1",), ("++c=2",)]),
        ("e.g. ~x.y ++x.y.type=colocation", [("~x.y", "++x.y.type=colocation")]),
        ("use t1 or t2", []),
        ("AREAL_CONF_GPU=h100 python -m areal_conf check ...", []),
        ("remove it: a=1 b=2  (or run: python -m areal_conf migrate)", [("a=1", "b=2")]),
    ],
)
def test_alternatives(hint: str, fixes: list[tuple[str, ...]]) -> None:
    assert [a.overrides for a in alternatives(hint)] == fixes

"""Every fix a message prints passes the whole check: a hint's fixes, tried
(areal_conf.rules.fixes). The catalogue-wide test is tests/test_docs.py's; these rows
pin the rewriting on a stand-in check."""

from __future__ import annotations

import pytest

from areal_conf.errors import AllocationError
from areal_conf.hints import Hint, either, fix, sentence
from areal_conf.rules.fixes import check_hint


def needs(*wanted: str, hint: Hint | str = "") -> AllocationError:
    return AllocationError(f"needs {' '.join(wanted)}", None, None, hint=hint)


def check(overrides: tuple[str, ...]) -> AllocationError | None:
    """A stand-in for the whole check: separating needs a second node; colocating needs
    offload, and offload needs the disk weight update; the teacher needs train."""
    given = set(overrides)
    if (
        "rollout.scheduling_strategy.type=separation" in given
        and "++cluster.n_nodes=2" not in given
    ):
        return needs(
            "nodes",
            hint=either(
                sentence("add nodes (", fix("++cluster.n_nodes=2"), ")"),
                " or ",
                "shrink an engine's layout",
            ),
        )
    if "rollout.scheduling_strategy.target=actor" in given:
        if "++enable_offload=true" not in given:
            return needs(
                "offload", hint=either(fix("++enable_offload=true"), ", or ", "something else")
            )
        if "++actor.weight_update_mode=disk" not in given:
            return needs("disk", hint=either(fix("++actor.weight_update_mode=disk")))
    if "teacher.engine_type=train" in given:
        return needs("a section", hint=either(fix("teacher.engine_type=rollout")))
    if "x=1" in given:
        return needs("nothing known", hint="read the docs")
    return None


@pytest.mark.parametrize(
    ("hint", "checked", "fixes"),
    [
        # passes as it is: unchanged, remarks and lead-ins included
        (
            either(fix("a.b=1", lead="this would fit: ", remark=" (GB per GPU: actor 70)")),
            "this would fit: a.b=1 (GB per GPU: actor 70)",
            [("a.b=1",)],
        ),
        # meets one rule: takes that rule's fix, found in a sentence's example
        (
            either(
                fix("++enable_offload=true"),
                ", or ",
                fix("rollout.scheduling_strategy.type=separation"),
            ),
            "++enable_offload=true, or rollout.scheduling_strategy.type=separation "
            "++cluster.n_nodes=2",
            [
                ("++enable_offload=true",),
                ("rollout.scheduling_strategy.type=separation", "++cluster.n_nodes=2"),
            ],
        ),
        # meets two rules one after the other
        (
            either(
                fix("rollout.scheduling_strategy.target=actor", remark=" (did you mean actor?)")
            ),
            "rollout.scheduling_strategy.target=actor ++enable_offload=true "
            "++actor.weight_update_mode=disk (did you mean actor?)",
            [
                (
                    "rollout.scheduling_strategy.target=actor",
                    "++enable_offload=true",
                    "++actor.weight_update_mode=disk",
                )
            ],
        ),
        # a fix that would undo the fix (the same key) is not taken: left out
        (
            either(
                fix("teacher.engine_type=rollout", remark=" (the default)"),
                " or ",
                fix("teacher.engine_type=train"),
            ),
            "teacher.engine_type=rollout (the default)",
            [("teacher.engine_type=rollout",)],
        ),
        # the first left out: the next loses the "or" that led into it
        (
            either(fix("x=1"), "; ", fix("a.b=2", lead="or ")),
            "a.b=2",
            [("a.b=2",)],
        ),
        # none passes: said, with the reason the first meets
        (
            either(fix("x=1")),
            "x=1 (none of these passes the whole check here: needs nothing known)",
            [],
        ),
        # words only, or a sentence's examples: nothing to try
        (either("shrink an engine's layout"), "shrink an engine's layout", []),
        (
            either(sentence("add nodes (", fix("x=1"), ")"), " or ", "shrink"),
            "add nodes (x=1) or shrink",
            [],
        ),
    ],
)
def test_check_hint(hint: Hint, checked: str, fixes: list[tuple[str, ...]]) -> None:
    result = check_hint(hint, check)
    assert result.hint is not None
    assert result.hint.text() == checked
    assert list(result.fixes) == fixes


def test_no_hint_is_left_alone() -> None:
    assert check_hint(None, check).hint is None

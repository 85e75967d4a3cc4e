"""``shape_of`` remembers the shapes of sizes written out; the memory must never change an
answer."""

from __future__ import annotations

from typing import Any

import pytest
from _perf_tables import DENSE_32B
from hypothesis import given
from hypothesis import strategies as st

from areal_conf.errors import AllocationError
from areal_conf.model.shape import ModelShape, shape_of

SIZES = DENSE_32B


def test_the_same_sizes_give_the_same_shape() -> None:
    first = shape_of(dict(SIZES))
    assert shape_of(dict(SIZES)) == first
    assert isinstance(first, ModelShape)
    assert first.num_layers == 48


@pytest.mark.parametrize("value", [True, 48.0, "48"])
def test_a_value_equal_to_a_remembered_one_but_of_another_type_is_refused(value: Any) -> None:
    # True == 1 and 48.0 == 48 as keys of a cache: the type keeps them apart.
    shape_of({**SIZES, "num_layers": 1})
    shape_of(dict(SIZES))
    with pytest.raises(AllocationError, match="num_layers"):
        shape_of({**SIZES, "num_layers": True if value is True else value})


def test_a_changed_mapping_gives_its_new_shape() -> None:
    sizes = dict(SIZES)
    assert shape_of(sizes).num_layers == 48
    sizes["num_layers"] = 24
    assert shape_of(sizes).num_layers == 24


def test_an_unhashable_value_is_read_and_refused() -> None:
    with pytest.raises(AllocationError, match="num_layers"):
        shape_of({**SIZES, "num_layers": [48]})


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 1 << 20),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


@given(st.dictionaries(st.sampled_from([*SIZES, "num_experts", "head_dim"]), values))
def test_remembered_and_read_answers_agree(changes: dict[str, Any]) -> None:
    given_sizes = {**SIZES, **changes}

    def answer(sizes: object) -> object:
        try:
            return shape_of(sizes)
        except AllocationError as err:
            return str(err)

    # A Mapping that is not a dict is always read afresh.
    class Sizes(dict):  # type: ignore[type-arg]
        pass

    assert answer(dict(given_sizes)) == answer(Sizes(given_sizes))
    assert answer(dict(given_sizes)) == answer(Sizes(given_sizes))

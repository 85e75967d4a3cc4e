"""The values AReaL's merge converts: areal-conf's plain-Python conversions are
OmegaConf's own (its nodes, as the merge AReaL's loader runs uses them), on any value;
tests/test_areal_loader.py holds them to AReaL's loader itself."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from omegaconf import BooleanNode, FloatNode, IntegerNode, StringNode
from omegaconf.errors import GrammarParseError, ValidationError

from areal_conf.config.known_keys import areal_keys
from areal_conf.config.known_values import CHOICES, NO_DEFAULT, PlainField, refusal

NODES = {"bool": BooleanNode, "int": IntegerNode, "float": FloatNode, "str": StringNode}

#: What a composed config can hold: YAML scalars, text that reads as one, sections, lists.
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1", "-3", "1e-5", "0x10", "yes", "Off", "N", "TRUE", " 2 ", "1_000", "inf"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def omegaconf_takes(kind: str, optional: bool, value: Any) -> bool:
    if isinstance(value, dict | list):  # the merge does not put a container in a value node
        return False
    try:
        NODES[kind](value=value, is_optional=optional)
    except ValidationError:
        return False
    except GrammarParseError:  # "${0": no config holds it, OmegaConf refuses it on loading
        assume(False)
    return True


@pytest.mark.parametrize("kind", list(NODES))
@pytest.mark.parametrize("optional", [False, True])
@given(value=values)
def test_a_value_is_taken_as_omegaconfs_node_takes_it(
    kind: str, optional: bool, value: Any
) -> None:
    field = PlainField("Owner", "name", kind, optional)
    assert field.takes(value) is omegaconf_takes(kind, optional, value)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_every_default_is_taken_by_its_own_field(version: str) -> None:
    """The fix writes a field's default (or an example of its type): it must be taken."""
    for fields in areal_keys(version).values.values():
        for field in fields.values():
            assert field.takes(field.example()), field
            if field.default is NO_DEFAULT:
                continue
            assert refusal("k", field.default, [field]) is None


def test_a_value_one_of_the_classes_takes_is_taken() -> None:
    """Where several of AReaL's classes may stand (actor: PPO's or DPO's), a value any of
    them takes passes."""
    strict = PlainField("A", "x", "int", False)
    loose = PlainField("B", "x", "str", False)
    assert refusal("s.x", "abc", [strict, loose]) is None
    refused = refusal("s.x", "abc", [strict])
    assert refused is not None and refused[0] == (
        "s.x: AReaL's A.x takes an integer, not 'abc'; AReaL's loader refuses the config"
    )


INT = [PlainField("A", "n", "int", False)]


@pytest.mark.parametrize(
    ("written", "refused"),
    [
        ("${other}", False),  # an interpolation: converted where it is read
        ("???", False),  # missing: AReaL's loader says so itself
        ("abc", True),
        (3, False),
        ({"a": 1}, True),  # a section where a value goes
        ([1], True),
        (None, True),
    ],
)
def test_a_value_is_read_from_a_config_node_as_written(written: Any, refused: bool) -> None:
    """The check reads a composed config's nodes as written, and plain data alike."""
    from omegaconf import OmegaConf

    from areal_conf.config.known_values import wrong_value

    cfg = OmegaConf.create({"n": written, "other": "abc"})
    node = cfg._get_node("n")
    assert (wrong_value(node, "s.n", INT) is not None) is refused
    # Plain data has no missing value: "???" is text there.
    assert (wrong_value(written, "s.n", INT) is not None) is (refused or written == "???")


def test_a_value_an_override_broke_can_go_back_to_the_yamls() -> None:
    """The fix of a value an override wrote: AReaL's default first (pasteable), or the
    override removed, which brings back the YAML's own value."""
    from _helpers import FIXTURES

    from areal_conf import check_command
    from areal_conf.errors import AllocationError

    argv = ["python", "x.py", "--config", "examples/math/gsm8k_grpo.yaml"]
    with pytest.raises(AllocationError) as info:
        check_command([*argv, "++actor.optimizer.lr=abc"], cwd=FIXTURES / "commands")
    assert info.value.hint.startswith("write AReaL's default: ++actor.optimizer.lr=")
    assert "or remove the override ++actor.optimizer.lr=abc" in info.value.hint


def test_each_set_of_values_belongs_to_a_text_field_whose_default_it_takes() -> None:
    """Each row of CHOICES names a text field of AReaL's table, and its default is one of
    the values (a misspelt class or field would check nothing)."""
    for version, rows in CHOICES.items():
        table = areal_keys(version).values
        for (owner, name), choices in rows.items():
            field = table[owner][name]
            assert field.type == "str" and field.choices == choices, (owner, name)
            assert field.default in choices.values, (owner, name)
            assert choices.source.startswith("api/cli_args.py:"), (owner, name)
            assert (None in choices.values) == field.optional, (owner, name)
            assert (choices.pattern is None) == (not choices.pattern_said), (owner, name)


@pytest.mark.parametrize(
    ("value", "taken"),
    [
        ("flash_attention_3", True),
        ("kernels-community/flash-attn3", True),
        ("wrapper|org/repo@v1:entry", True),
        ("flash_attn3", False),
        ("org/repo/extra", False),
        ("org:repo", False),
    ],
)
def test_attn_impl_is_a_builtin_or_a_kernels_repo_id(value: str, taken: bool) -> None:
    """AReaL's is_valid_attn_impl: a builtin name, or transformers' is_kernel pattern."""
    for owner in ("PPOActorConfig", "PPOCriticConfig", "DPOEngineConfig"):
        assert areal_keys("2.0").values[owner]["attn_impl"].takes(value) is taken


@pytest.mark.parametrize(
    ("value", "taken"),
    [("kl_k1", True), ("binary_kl", False), (None, False), (3, False), ("ratio ", False)],
)
def test_a_text_checked_against_a_set_takes_only_its_values(value: Any, taken: bool) -> None:
    metric = areal_keys("2.0").values["RejectionSamplingConfig"]["metric"]
    assert metric.takes(value) is taken
    refused = refusal("actor.rejection_sampling.metric", value, [metric])
    assert (refused is None) is taken
    if refused is not None and value is not None:
        assert "takes one of 'ratio', 'kl_k1', 'kl_k2', 'kl_k3'" in refused[0]

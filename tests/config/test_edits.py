"""``with_overrides``: a config with overrides applied as Hydra's ``++`` applies them, on
a plain mapping as on an OmegaConf config."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from areal_conf.config.edits import plain_value, with_overrides
from areal_conf.overrides import hydra_value


@pytest.mark.parametrize("omegaconf", [False, True], ids=["mapping", "omegaconf"])
def test_a_deletion_removes_the_key(omegaconf: bool) -> None:
    """``~model.x`` (a fix that renames a key) leaves no ``x``, not ``x: null``: AReaL's
    loader refuses an unknown key whatever its value."""
    from omegaconf import OmegaConf

    given = {"model": {"x": 1, "y": 2}, "actor": {"backend": "fsdp:d8"}}
    cfg = OmegaConf.create(given) if omegaconf else given
    edited = with_overrides(cfg, ["~model.x", "++model.z=3"])
    assert dict(edited["model"]) == {"y": 2, "z": 3}
    assert list(edited["model"]) == ["y", "z"]
    assert "x" not in edited["model"]
    assert dict(cfg["model"]) == {"x": 1, "y": 2}  # the config itself is not changed


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab:()|'\"\\ ,=$"), max_size=12))
def test_a_quoted_value_is_read_as_hydra_reads_it(value: str) -> None:
    """A value a fix writes in Hydra's quotes (a hybrid layout) is checked as the string
    Hydra's override parser gives the application, not with its quotes."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    written = f"actor.backend={hydra_value(value)}"
    assert OverridesParser.create().parse_override(written).value() == value
    assert plain_value(written.partition("=")[2]) == value
    edited = with_overrides({"actor": {"backend": "fsdp:d8"}}, [written])
    assert edited["actor"]["backend"] == value


def test_a_double_quoted_value_loses_its_quotes() -> None:
    assert plain_value('"megatron:(attn:d2|ffn:t2)"') == "megatron:(attn:d2|ffn:t2)"
    assert plain_value("'null'") == "null" and plain_value("null") is None

"""``with_overrides``: a config with overrides applied as Hydra's ``++`` applies them, on
a plain mapping as on an OmegaConf config."""

from __future__ import annotations

import pytest

from areal_conf.config.edits import with_overrides


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

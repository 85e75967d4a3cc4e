"""Reading a config once: ``read_value`` gives what OmegaConf's own ``get`` gives.

``read_value`` follows ``${a.b}`` interpolations itself (OmegaConf parses each with its
grammar, most of a read's cost) and leaves every other kind to OmegaConf; either way the
value must be OmegaConf's, and an unresolvable one an AllocationError naming the key.
"""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from areal_conf import AllocationError
from areal_conf.areal_versions import VERSIONS
from areal_conf.reading import read_config, read_value

CONFIG: dict[str, Any] = {
    "actor": {
        "backend": "fsdp:d8",
        "path": "Qwen/Qwen3-8B",
        "dtype": "bfloat16",
        "offload": False,
        "kl_ctl": 0.0,
        "none": None,
        "scheduling_spec": [{"gpu": 1, "cmd": "x"}],
    },
    "base": {"path": "${actor.path}"},
    "cases": {
        "plain": "${actor.backend}",
        "chained": "${base.path}",
        "a bool": "${actor.offload}",
        "a float": "${actor.kl_ctl}",
        "null": "${actor.none}",
        "a section": "${actor}",
        "a list": "${actor.scheduling_spec}",
        "into a list": "${actor.scheduling_spec.0.gpu}",
        "in a string": "x-${actor.dtype}",
        "a resolver": "${oc.env:AREAL_CONF_TEST_READING,fallback}",
        "relative": "${..actor.dtype}",
        "not interpolated": 42,
    },
}


def config() -> DictConfig:
    cfg = OmegaConf.create(CONFIG)
    assert isinstance(cfg, DictConfig)
    return cfg


@pytest.mark.parametrize("key", list(CONFIG["cases"]))
def test_read_value_is_omegaconfs_get(key: str) -> None:
    cfg = config()
    cases = cfg.cases
    theirs: Any = cases.get(key)
    ours = read_value(cases, key, f"cases.{key}")
    if isinstance(theirs, DictConfig | type(OmegaConf.create([]))):
        assert OmegaConf.to_container(ours, resolve=True) == OmegaConf.to_container(
            theirs, resolve=True
        )
    else:
        assert ours == theirs and type(ours) is type(theirs)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("${actor.nowhere}", "Interpolation key 'actor.nowhere' not found"),
        (
            "${oc.env:AREAL_CONF_TEST_UNSET}",
            "Environment variable 'AREAL_CONF_TEST_UNSET' not found",
        ),
    ],
)
def test_a_value_that_does_not_resolve_names_its_key(value: str, reason: str) -> None:
    cfg = config()
    cfg.cases.bad = value
    with pytest.raises(AllocationError) as info:
        read_value(cfg.cases, "bad", "cases.bad")
    assert info.value.reason == f"cases.bad: {reason}"


def test_a_missing_value_reads_as_none_as_omegaconfs_get() -> None:
    cfg = config()
    cfg.cases.bad = "???"
    assert cfg.cases.get("bad") is None
    assert read_value(cfg.cases, "bad", "cases.bad") is None


def test_an_absent_key_is_the_default() -> None:
    assert read_value(config().actor, "nope", "actor.nope", "dflt") == "dflt"
    assert read_value({"a": 1}, "a", "a") == 1  # a plain mapping too


def test_read_config_reads_interpolated_engine_keys() -> None:
    cfg = config()
    cfg.ref = {"backend": "${actor.backend}", "scheduling_spec": "${actor.scheduling_spec}"}
    run = read_config(cfg, VERSIONS["2.0"])
    assert run.engines["ref"].backend == "fsdp:d8"
    assert run.engines["ref"].specs is not None and run.engines["ref"].specs[0].gpu == 1

"""An interpolation of a key the YAML leaves out resolves to AReaL's default, as in AReaL.

AReaL's loader merges the YAML onto its dataclasses before it resolves anything
(``to_structured_cfg``, areal/api/cli_args.py:3534-3541 at AReaL cbff54d64), so
``${cluster.n_gpus_per_node}`` is 8 (cli_args.py:3060-3061) and
``${train_dataset.batch_size}`` 1 (cli_args.py:3097-3098) when the YAML does not write
them; ``${teacher...}`` stays unresolvable, as the teacher is null by default
(cli_args.py:3413-3414). ``tests/test_areal_loader.py`` holds AReaL's own verdicts on the
same overrides.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from _helpers import FIXTURES
from omegaconf import OmegaConf

from areal_conf import AllocationError, validate
from areal_conf.command.check import checked_command
from areal_conf.config.areal_defaults import referenced_defaults

GSM8K = ["python", "examples/math/gsm8k_rl.py", "--config", "examples/math/gsm8k_grpo.yaml"]
COMMANDS = FIXTURES / "commands"


class Filled(NamedTuple):
    written: dict[str, Any]
    defaults: dict[str, object]  # full key: AReaL's default


FILLED = [
    Filled(  # a section AReaL makes, left out whole
        {"rollout": {"max_concurrent_rollouts": "${cluster.n_gpus_per_node}"}},
        {"cluster.n_gpus_per_node": 8},
    ),
    Filled(  # a key left out of a section the YAML writes; inside a longer string
        {"cluster": {"n_nodes": 2}, "x": {"y": ["gpus-${cluster.n_gpus_per_node}"]}},
        {"cluster.n_gpus_per_node": 8},
    ),
    Filled(
        {"train_dataset": {"path": "p"}, "rollout": {"c": "${train_dataset.batch_size}"}},
        {"train_dataset.batch_size": 1},
    ),
    Filled(  # written: nothing to fill
        {"cluster": {"n_gpus_per_node": 4}, "r": {"c": "${cluster.n_gpus_per_node}"}},
        {},
    ),
]

NOT_FILLED = [
    {"r": {"c": "${experiment_name}"}},  # required: AReaL has no default either
    {"r": {"c": "${teacher.rollout.backend}"}},  # the teacher is null by default
    {"r": {"c": "${actor.path}"}},  # the actor is no section AReaL makes
    {"cluster": None, "r": {"c": "${cluster.n_gpus_per_node}"}},  # null: not a section
    {"r": {"c": "${cluster.no_such_key}"}},  # no such field
    {"r": {"c": "${oc.env:HOME}", "d": "${.c}"}},  # a resolver, a relative key
]


@pytest.mark.parametrize(Filled._fields, FILLED)
@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_a_key_an_interpolation_names_has_areals_default(
    written: dict[str, Any], defaults: dict[str, object], version: str
) -> None:
    assert referenced_defaults(OmegaConf.create(written), version) == defaults


@pytest.mark.parametrize("written", NOT_FILLED, ids=str)
def test_what_areal_has_no_default_for_has_none(written: dict[str, Any]) -> None:
    assert referenced_defaults(OmegaConf.create(written), "2.0") == {}


@pytest.mark.parametrize(
    "overrides",
    [
        (
            "~cluster.n_gpus_per_node",
            "++rollout.max_concurrent_rollouts=${cluster.n_gpus_per_node}",
        ),
        # the fixture writes no batch size: AReaL's default
        ("++rollout.max_concurrent_rollouts=${train_dataset.batch_size}",),
        ("~cluster",),  # the YAML's saver.fileroot is ${cluster.fileroot}
    ],
)
def test_check_resolves_what_areal_resolves(overrides: tuple[str, ...]) -> None:
    checked = checked_command([*GSM8K, *overrides], cwd=COMMANDS)
    assert checked.unresolved is None, checked.unresolved


def test_a_reference_areal_cannot_resolve_stays_an_error_at_its_key() -> None:
    reference = "++rollout.max_concurrent_rollouts=${teacher.rollout.max_concurrent_rollouts}"
    with pytest.raises(AllocationError) as info:
        checked_command([*GSM8K, reference], cwd=COMMANDS)
    assert info.value.reason.startswith("rollout.max_concurrent_rollouts: "), info.value


def test_validate_reads_a_key_the_config_leaves_out_as_areals_default() -> None:
    """``validate`` of a YAML as written (a sweep's jobs, the Python API) resolves it too."""
    cfg = OmegaConf.create(
        {
            "rollout": {
                "backend": "sglang:d4",
                "max_concurrent_rollouts": "${cluster.n_gpus_per_node}",
            },
            "actor": {"backend": "fsdp:d4"},
        }
    )
    run = validate(cfg, areal_version="2.0").run
    assert run is not None and run.engines["rollout"].max_concurrent_rollouts == 8
    assert "cluster" not in cfg  # read, not written

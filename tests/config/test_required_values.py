"""The values AReaL's loader requires (fields with no default, ``MISSING`` in
``areal/api/cli_args.py``), in the sections a YAML writes and those AReaL makes by
default: the check of an AReaL command refuses a config without them, as AReaL's loader
does ("Structured config of type `SaverConfig` has missing mandatory value:
experiment_name"); ``validate`` of a config given for its layouts does not ask for them.
``tests/test_areal_loader.py`` holds the verdicts to AReaL's own loader.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from _helpers import FIXTURES

from areal_conf import AllocationError, check_command, validate
from areal_conf.config.known_keys import check_keys

#: AReaL's command on the error catalogue's YAML, a whole AReaL config.
GSM8K = ["python", "examples/math/gsm8k_rl.py", "--config", "examples/math/gsm8k_grpo.yaml"]
COMMANDS = FIXTURES / "commands"


class Missing(NamedTuple):
    overrides: tuple[str, ...]
    reason: str  # the start of the message
    fix: str  # a part of the hint


MISSING = [
    Missing(
        ("~experiment_name",),
        "experiment_name: missing; AReaL's",
        "++experiment_name=<experiment_name>",
    ),
    Missing(
        ("~actor.experiment_name",),
        "actor.experiment_name: missing; AReaL's PPOActorConfig",
        "++actor.experiment_name=<experiment_name>",
    ),
    Missing(  # a section AReaL makes when the YAML leaves it out: all three in one fix
        ("~saver",),
        "saver.experiment_name: missing (the config has no saver: AReaL makes it with its "
        "defaults); AReaL's SaverConfig has no default for experiment_name",
        "++saver.experiment_name=<experiment_name> ++saver.trial_name=<trial_name> "
        "++saver.fileroot=<fileroot>",
    ),
    Missing(  # an engine's backend, built or not (AReaL's loader requires it of both)
        ("~rollout.backend",),
        "rollout.backend: missing; AReaL's InferenceEngineConfig",
        "++rollout.backend=sglang:d2t4",
    ),
    Missing(  # ??? is no value; the fix rewrites the override that wrote it
        ("train_dataset.path=???",),
        "train_dataset.path: ??? is no value; AReaL's TrainDatasetConfig",
        "train_dataset.path=<path>",
    ),
]


@pytest.mark.parametrize(Missing._fields, MISSING, ids=[m.overrides[0] for m in MISSING])
def test_an_areal_command_may_not_lack_a_required_value(
    overrides: tuple[str, ...], reason: str, fix: str
) -> None:
    with pytest.raises(AllocationError) as info:
        check_command([*GSM8K, *overrides], cwd=COMMANDS)
    assert info.value.reason.startswith(reason) or reason in info.value.reason, info.value
    assert fix in info.value.hint, info.value.hint


@pytest.mark.parametrize("overrides", [(), ("~cluster",), ("~rollout.scheduling_spec",)])
def test_what_areal_makes_or_does_not_require_passes(overrides: tuple[str, ...]) -> None:
    """The cluster AReaL makes has no required value; an inference engine requires no
    name (only its backend, which its own rules read)."""
    check_command([*GSM8K, *overrides], cwd=COMMANDS)


def test_a_config_given_for_its_layouts_need_not_be_whole() -> None:
    """``validate`` of the engines alone: the reading keeps what a whole config would
    lack, and the plan is made."""
    cfg = {"rollout": {"backend": "sglang:d4"}, "actor": {"backend": "fsdp:d4"}}
    plan = validate(cfg, areal_version="2.0")
    assert plan.gpus_by_engine() == {"rollout": 4, "actor": 4}
    missing = [str(error.key) for error in plan.run.missing_values]
    assert missing[:2] == ["experiment_name", "trial_name"]
    assert "actor.experiment_name" in missing and "train_dataset.path" in missing


def test_areal_conf_s_own_configs_are_not_asked() -> None:
    """areal-conf's own configs (with its ``model`` section) follow its own schema."""
    _, missing = check_keys({"model": {}, "actor": {"backend": "fsdp:d8"}}, "2.0")
    assert missing == ()

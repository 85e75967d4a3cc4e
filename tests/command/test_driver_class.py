"""The config class a driver script loads its config into, read from its source, and the
top-level keys of an AReaL command's config checked against it, as AReaL's loader merges
the YAML into that class strictly (``load_expr_config(args, GRPOConfig)`` in AReaL's
``examples/math/gsm8k_rl.py:10``; ``Key 'launcher' not in 'GRPOConfig'``).
``tests/test_areal_loader.py`` holds AReaL's own verdicts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _helpers import FIXTURES

from areal_conf import AllocationError, check_command
from areal_conf.command.driver_class import DriverClass, driver_config_class
from areal_conf.config.known_keys import areal_keys

EXPERIMENTS = areal_keys("2.0").experiments
IMPORT = "from areal.api.cli_args import GRPOConfig, load_expr_config\n"

SCRIPTS = [
    (
        IMPORT + "config, _ = load_expr_config(args, GRPOConfig)\n",
        DriverClass("GRPOConfig", "GRPOConfig"),
    ),
    (
        "from areal.api.cli_args import SFTConfig as C\nfrom areal.api import cli_args\n"
        "cfg, _ = cli_args.load_expr_config(argv, config_cls=C)\n",
        DriverClass("C", "SFTConfig"),
    ),
    (  # the script's own subclasses add their fields
        IMPORT + "@dataclass\nclass Base(GRPOConfig):\n    extra: int = 0\n"
        "@dataclass\nclass Mine(Base):\n    more: str = ''\n    x = 1\n"
        "load_expr_config(args, Mine)\n",
        DriverClass("Mine", "GRPOConfig", frozenset({"extra", "more"})),
    ),
]

UNKNOWN = [
    "from examples.tau2.utils import Tau2PPOConfig\nload_expr_config(args, Tau2PPOConfig)\n",
    IMPORT + "class Mine(GRPOConfig, Other):\n    a: int = 0\nload_expr_config(args, Mine)\n",
    IMPORT + "load_expr_config(args, GRPOConfig)\nload_expr_config(args, SFTConfig)\n",
    IMPORT + "load_expr_config(args, pick())\n",
    IMPORT + "print('no loader here')\n",
    "from areal.api.cli_args import AgentConfig\nload_expr_config(args, AgentConfig)\n",
    "def broken(:\n",
    "x = '\0'\n",
]


@pytest.mark.parametrize(("source", "found"), SCRIPTS)
def test_the_class_a_driver_loads_its_config_into(
    source: str, found: DriverClass, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    assert driver_config_class(script, EXPERIMENTS) == found


@pytest.mark.parametrize("source", UNKNOWN)
def test_a_class_areal_conf_cannot_tell_is_none(source: str, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    assert driver_config_class(script, EXPERIMENTS) is None


def test_no_script_is_none(tmp_path: Path) -> None:
    assert driver_config_class(tmp_path / "absent.py", EXPERIMENTS) is None


def _command_dir(tmp_path: Path, source: str) -> Path:
    """The commands fixture's YAML beside a driver script of ``source``."""
    root = tmp_path / "areal"
    shutil.copytree(FIXTURES / "commands" / "examples", root / "examples")
    (root / "examples" / "math" / "gsm8k_rl.py").write_text(source)
    return root


GSM8K = ["python", "examples/math/gsm8k_rl.py", "--config", "examples/math/gsm8k_grpo.yaml"]


@pytest.mark.parametrize(
    ("override", "reason", "hint"),
    [
        (
            "+total_train_epoch=1",
            "total_train_epoch: no such key in AReaL's GRPOConfig",
            "did you mean total_train_epochs?",
        ),
        ("+launcher.x=1", "launcher: no such key in AReaL's GRPOConfig", "remove the override"),
    ],
)
def test_a_top_level_key_the_drivers_class_lacks_is_refused(
    override: str, reason: str, hint: str, tmp_path: Path
) -> None:
    root = _command_dir(tmp_path, IMPORT + "load_expr_config(args, GRPOConfig)\n")
    with pytest.raises(AllocationError) as info:
        check_command([*GSM8K, override], cwd=root)
    assert info.value.reason.startswith(reason), info.value
    assert hint in info.value.hint


def test_a_top_level_key_of_the_drivers_own_subclass_passes(tmp_path: Path) -> None:
    source = IMPORT + "class Mine(GRPOConfig):\n    judge: int = 0\nload_expr_config(args, Mine)\n"
    check_command([*GSM8K, "+judge=1"], cwd=_command_dir(tmp_path, source))


def test_without_a_class_it_can_tell_the_top_level_is_left_alone(tmp_path: Path) -> None:
    source = "from elsewhere import Mine\nload_expr_config(args, Mine)\n"
    check_command([*GSM8K, "+judge=1"], cwd=_command_dir(tmp_path, source))

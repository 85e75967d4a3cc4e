"""The config class a driver script loads its config into, read from its source, and the
top-level keys of an AReaL command's config checked against it, as AReaL's loader merges
the YAML into that class strictly (``load_expr_config(args, GRPOConfig)`` in AReaL's
``examples/math/gsm8k_rl.py:10``; ``Key 'launcher' not in 'GRPOConfig'``).
``tests/test_areal_loader.py`` holds AReaL's own verdicts. Also what a driver that
builds no trainer builds: only the engines it reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _helpers import FIXTURES

from areal_conf import AllocationError, check_command
from areal_conf.areal.drivers import driver_scope
from areal_conf.command.driver_class import DriverClass, driver_config_class
from areal_conf.command.sweep import sweep_command
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


# -- what a driver that builds no trainer builds ---------------------------------------
# AReaL's evaluation and online-rollout examples load a GRPO/PPO config and build only its
# rollout (examples/math/gsm8k_eval.py:17-67,
# examples/experimental/inference_service/online_rollout.py:32-79); its trainers build
# every engine (areal/trainer/rl_trainer.py).

EVAL = (
    "from areal.api.cli_args import GRPOConfig, load_expr_config\n"
    "from areal.infra import LocalScheduler\n"
    "config, _ = load_expr_config(args, GRPOConfig)\n"
    "scheduler = LocalScheduler(exp_config=config)\n"
    "config.rollout.max_head_offpolicyness = 10\n"
    "engine = RemoteSGLangEngine.as_controller(config.rollout, scheduler)\n"
    "print(config.gconfig)\n"
)

SCOPES = [
    (EVAL, frozenset({"rollout", "gconfig"})),
    (  # ``load_expr_config(...)[0]`` binds no plain name: every engine
        "from areal.infra.scheduler.slurm import SlurmScheduler as S\n"
        "cfg = load_expr_config(argv, PPOConfig)[0]\nS(cfg)\ncfg.rollout\n",
        None,
    ),
    (  # a positional argument of a scheduler imported under another name
        "from areal.infra.scheduler.slurm import SlurmScheduler as S\n"
        "cfg, _ = load_expr_config(argv, PPOConfig)\nS(cfg)\nprint(cfg.rollout, cfg.ref)\n",
        frozenset({"rollout", "ref"}),
    ),
    (EVAL + "from areal import PPOTrainer\n", None),  # a trainer builds every engine
    (EVAL + "import areal\nareal.PPOTrainer(config)\n", None),
    (EVAL + "run(config)\n", None),  # the whole config goes somewhere unknown
    (EVAL + "other = config\n", None),
    (EVAL + "config = reload()\n", None),  # the name bound again
    (EVAL + "load_expr_config(args, SFTConfig)\n", None),  # two loads
    (EVAL + "LocalScheduler(config).run(config)\n", None),
    ("def broken(:\n", None),
]


@pytest.mark.parametrize(("source", "reads"), SCOPES)
def test_what_a_driver_without_a_trainer_reads(
    source: str, reads: frozenset[str] | None, tmp_path: Path
) -> None:
    script = tmp_path / "eval.py"
    script.write_text(source)
    scope = driver_scope(script, "eval.py")
    assert (scope.reads if scope is not None else None) == reads


def test_an_engine_the_driver_does_not_build_takes_no_gpu(tmp_path: Path) -> None:
    plan = check_command(GSM8K, cwd=_command_dir(tmp_path, EVAL))
    assert plan.not_built() == {
        "actor": "examples/math/gsm8k_rl.py builds no AReaL trainer and does not read actor"
    }
    assert [e.name for e in plan.engines.values() if e.enabled] == ["rollout"]
    assert plan.used_gpus == 4


def test_a_driver_without_a_trainer_meets_none_of_the_trainers_rules(tmp_path: Path) -> None:
    # PPOTrainer refuses an actor and a rollout on different controller versions
    # (areal/trainer/rl_trainer.py:1522-1529); a script that builds no trainer does not.
    split = [*GSM8K, "++rollout._version=v2", "++rollout.scheduling_spec=${actor.scheduling_spec}"]
    with pytest.raises(AllocationError, match="controller version"):
        check_command(split, cwd=_command_dir(tmp_path, IMPORT + TRAINER))
    check_command(split, cwd=_command_dir(tmp_path / "eval", EVAL))


TRAINER = (
    "from areal import PPOTrainer\n"
    "config, _ = load_expr_config(args, GRPOConfig)\n"
    "PPOTrainer(config)\n"
)


def test_a_sweep_checks_its_jobs_for_the_engines_the_driver_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    versions = [*GSM8K, "++rollout.scheduling_spec=${actor.scheduling_spec}"]
    versions += ["++rollout._version=v1,v2", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    assert sweep_command(versions, dry_run=True, cwd=_command_dir(tmp_path, EVAL)) == 0
    out = capsys.readouterr().out
    assert out.count("actor    (not built)") == 2, out

"""The ``areal`` launcher plugin (SPEC §6, issue 4).

* Hydra's own launcher suites (``LauncherTestSuite``, ``BatchedSweeperTestSuite``,
  ``IntegrationTestSuite``) run against ``hydra/launcher=areal`` with the basic inner
  launcher: a config that is not an AReaL config passes through untouched.
* In-process sweeps of a small AReaL app: a batch with bad jobs raises one
  ``ConfigCompositionException`` naming every bad job, calls no task, creates no job
  directory; dry runs print the allocations and run nothing.
* Real multiruns through hydra-joblib-launcher and hydra-submitit-launcher
  (``submitit_local``), and the end-to-end ``train.py`` checks of issue 4.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT, Train, job_dirs, run_python, user_env
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from hydra.errors import ConfigCompositionException
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)
from hydra.test_utils.test_utils import TSweepRunner
from omegaconf import DictConfig

from areal_conf.hydra.compat import VERSION_BASE
from areal_conf.hydra.job_overrides import job_overrides_line
from hydra_plugins.areal_conf_plugin import _core, _handover
from hydra_plugins.areal_conf_plugin._compose import SweepLoader
from hydra_plugins.areal_conf_plugin._configs import AReaLLauncherConf
from hydra_plugins.areal_conf_plugin.areal_launcher import AReaLLauncher

#: How allocation_mode=sglang:d4t2+fsdp:d8 is translated in a message.
TRANSLATION = (
    "rollout.backend=sglang:d4t2 rollout.scheduling_strategy.type=separation "
    "actor.backend=fsdp:d8 actor.scheduling_strategy.type=separation"
)

HYBRID = "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)"


@pytest.fixture(autouse=True)
def _subprocess_pythonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    """Applications started in a subprocess (Hydra's integration suite, the end-to-end
    tests) find this checkout's ``hydra_plugins`` and ``areal_conf`` first."""
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)


# --------------------------------------------------------------- Hydra's suites


def test_discovery() -> None:
    # by name: Hydra's scan re-executes plugin modules, so the class objects differ
    names = [f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Launcher)]
    assert f"{AReaLLauncher.__module__}.{AReaLLauncher.__name__}" in names


@pytest.mark.e2e  # real sweeps through a real launcher, in this process
@pytest.mark.parametrize("launcher_name, overrides", [("areal", [])])
class TestAReaLLauncher(LauncherTestSuite):
    """Hydra's launcher suite through ``areal`` + the basic inner launcher."""


@pytest.mark.e2e  # real sweeps through a real launcher, in this process
@pytest.mark.parametrize(
    "launcher_name, overrides", [("areal", ["hydra.sweeper.max_batch_size=2"])]
)
class TestAReaLLauncherBatched(BatchedSweeperTestSuite):
    """Several batches: job numbers continue across batches."""


@pytest.mark.e2e
@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [
        (
            {
                "defaults": [
                    {"override hydra/launcher": "areal"},
                    {"override hydra/hydra_logging": "hydra_debug"},
                    {"override hydra/job_logging": "disabled"},
                ]
            },
            ["-m"],
        )
    ],
)
class TestAReaLLauncherIntegration(IntegrationTestSuite):
    """Hydra's integration suite: subprocess apps selecting ``areal`` in their defaults."""


# --------------------------------------------------------------- an AReaL test app

APP_CONFIG = """\
rollout:
  backend: "sglang:d2t4"
  scheduling_strategy: {type: separation, target: null}
actor:
  backend: "fsdp:d8"
  scheduling_strategy: {type: separation, target: null}
critic:
  backend: ""
  scheduling_strategy: {type: colocation, target: actor}
ref:
  backend: ""
  scheduling_strategy: {type: colocation, target: actor}
teacher:
  rollout:
    backend: ""
    scheduling_strategy: {type: separation, target: null}
cluster:
  n_nodes: 2
  n_gpus_per_node: 8
allocation_mode: ""
"""

APP_SOURCE = """\
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig

from areal_conf.hydra.compat import VERSION_BASE


@hydra.main(config_path="conf", config_name="config", **VERSION_BASE)
def main(cfg):
    hc = HydraConfig.get()
    line = f"TASK RAN {hc.job.num} {cfg.actor.backend}"
    print(line, flush=True)
    Path(hc.runtime.output_dir, "task.txt").write_text(line)
    return 1.0  # an objective for adaptive sweepers (Optuna)


if __name__ == "__main__":
    main()
"""


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    (app / "conf").mkdir(parents=True)
    (app / "conf" / "config.yaml").write_text(APP_CONFIG)
    (app / "app.py").write_text(APP_SOURCE)
    return app


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, cfg: DictConfig) -> str:
        self.calls.append(str(cfg.actor.backend))
        return str(cfg.actor.backend)


def sweep(runner: TSweepRunner, app: Path, overrides: list[str], sweep_dir: Path, task: Any) -> Any:
    return runner(
        calling_file=str(app / "app.py"),
        calling_module=None,
        task_function=task,
        config_path="conf",
        config_name="config",
        overrides=["hydra/launcher=areal", *overrides],
        temp_dir=sweep_dir,
    )


@pytest.mark.e2e  # real sweeps through a real launcher, in this process
@pytest.mark.usefixtures("hydra_restore_singletons")
class TestValidation:
    def test_valid_batch_runs_every_job(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        with sweep(
            hydra_sweep_runner, app_dir, ["actor.backend=fsdp:d8,fsdp:d4t2"], sweep_dir, task
        ) as s:
            assert s.returns is not None
            assert [r.return_value for r in s.returns[0]] == ["fsdp:d8", "fsdp:d4t2"]
            assert [r.hydra_cfg.hydra.job.num for r in s.returns[0]] == [0, 1]
            assert job_dirs(sweep_dir) == ["0", "1"]
        assert task.calls == ["fsdp:d8", "fsdp:d4t2"]

    def test_one_bad_job_stops_the_batch(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        runner = sweep(
            hydra_sweep_runner,
            app_dir,
            ["actor.backend=fsdp:d8,d4t2,fsdp:d4t2"],
            sweep_dir,
            task,
        )
        with pytest.raises(ConfigCompositionException) as info:
            runner.__enter__()
        msg = str(info.value)
        assert "1 of 3 jobs failed validation" in msg
        assert "\n#1 actor.backend=d4t2\n" in msg
        assert "    actor.backend: no backend prefix" in msg
        assert "#0" not in msg and "#2" not in msg
        assert task.calls == []
        assert job_dirs(sweep_dir) == []  # the sweeper's multirun.yaml only

    def test_every_failing_job_is_listed(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        runner = sweep(
            hydra_sweep_runner,
            app_dir,
            [
                "actor.backend=fdsp:d8,fsdp:d8,d4t2",
                "allocation_mode='',sglang:d4t2+fsdp:d8",
            ],
            sweep_dir,
            task,
        )
        with pytest.raises(ConfigCompositionException) as info:
            runner.__enter__()
        msg = str(info.value)
        assert "5 of 6 jobs failed validation" in msg
        # job numbers in batch order, each with its overrides as typed and its reason
        assert [line.split(" ")[0] for line in msg.splitlines() if line.startswith("#")] == [
            "#0",
            "#1",
            "#3",
            "#4",
            "#5",
        ]
        assert "#0 actor.backend=fdsp:d8 \"allocation_mode=''\"\n" in msg
        assert "unknown backend 'fdsp'" in msg
        assert "#3 actor.backend=fsdp:d8 allocation_mode=sglang:d4t2+fsdp:d8\n" in msg
        assert TRANSLATION in msg
        assert "#4 actor.backend=d4t2 \"allocation_mode=''\"\n" in msg
        assert msg.count("no backend prefix") == 1
        assert task.calls == []
        assert job_dirs(sweep_dir) == []

    def test_the_whole_sweep_is_validated_before_the_first_batch(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        # Hydra's basic sweeper hands the launcher one job at a time; the bad job is the
        # last one, and still nothing runs.
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        runner = sweep(
            hydra_sweep_runner,
            app_dir,
            ["actor.backend=fsdp:d8,fsdp:d4t2,d4t2,fdsp:d8", "hydra.sweeper.max_batch_size=1"],
            sweep_dir,
            task,
        )
        with pytest.raises(ConfigCompositionException) as info:
            runner.__enter__()
        msg = str(info.value)
        assert msg.startswith(
            "areal launcher: 2 of 4 jobs of the sweep failed validation; no job was launched."
        )
        assert [line.split(" ")[0] for line in msg.splitlines() if line.startswith("#")] == [
            "#2",
            "#3",
        ]
        assert "#2 actor.backend=d4t2\n" in msg and "#3 actor.backend=fdsp:d8\n" in msg
        assert task.calls == []
        assert job_dirs(sweep_dir) == []

    def test_sweeper_params_are_part_of_the_whole_sweep(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        config = app_dir / "conf" / "config.yaml"
        config.write_text(
            config.read_text() + "hydra:\n  sweeper:\n    params:\n      cluster.n_nodes: 2,1\n"
        )
        task = Recorder()
        runner = sweep(
            hydra_sweep_runner,
            app_dir,
            ["actor.backend=fsdp:d8,fsdp:d4t2", "hydra.sweeper.max_batch_size=1"],
            tmp_path / "sweep",
            task,
        )
        with pytest.raises(ConfigCompositionException) as info:
            runner.__enter__()
        msg = str(info.value)
        assert "2 of 4 jobs of the sweep failed validation" in msg
        assert "#2 cluster.n_nodes=1 actor.backend=fsdp:d8\n" in msg
        assert "#3 cluster.n_nodes=1 actor.backend=fsdp:d4t2\n" in msg
        assert task.calls == []

    def test_valid_batched_sweep_runs_every_batch(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        overrides = ["actor.backend=fsdp:d8,fsdp:d4t2,fsdp:d2t4", "hydra.sweeper.max_batch_size=2"]
        with sweep(hydra_sweep_runner, app_dir, overrides, sweep_dir, task) as s:
            assert s.returns is not None
            assert [[r.hydra_cfg.hydra.job.num for r in b] for b in s.returns] == [[0, 1], [2]]
            assert job_dirs(sweep_dir) == ["0", "1", "2"]
        assert task.calls == ["fsdp:d8", "fsdp:d4t2", "fsdp:d2t4"]

    def test_long_validations_report_progress(
        self,
        hydra_sweep_runner: TSweepRunner,
        app_dir: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        import areal_conf.progress

        class Immediate(areal_conf.progress.Progress):
            """Progress as a long validation shows it, without waiting a second."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **{**kwargs, "delay": 0.0, "interval": 0.0})

        monkeypatch.setattr(areal_conf.progress, "Progress", Immediate)
        overrides = ["actor.backend=fsdp:d8,fsdp:d4t2,fsdp:d2t4", "hydra.launcher.dry_run=true"]
        with (
            caplog.at_level("INFO"),
            sweep(hydra_sweep_runner, app_dir, overrides, tmp_path / "s", Recorder()),
        ):
            pass
        lines = [r.getMessage() for r in caplog.records if "validating jobs" in r.getMessage()]
        assert [line.split(",")[0] for line in lines[:3]] == [
            f"areal launcher: validating jobs: {i} of 3" for i in (1, 2, 3)
        ]
        assert all(" left" in line for line in lines[:2])
        assert lines[3].startswith("areal launcher: validating jobs: 3 of 3 in ")

    def test_dry_run_prints_each_job_and_runs_none(
        self,
        hydra_sweep_runner: TSweepRunner,
        app_dir: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        task = Recorder()
        sweep_dir = tmp_path / "sweep"
        overrides = [
            f"actor.backend=fsdp:d8,'{HYBRID}'",
            "cluster.n_nodes=5",
            "hydra.launcher.dry_run=true",
        ]
        with sweep(hydra_sweep_runner, app_dir, overrides, sweep_dir, task) as s:
            assert s.returns == [[]]
            assert job_dirs(sweep_dir) == []
        assert task.calls == []
        lines = capsys.readouterr().out.splitlines()
        assert lines == [
            "#0 actor.backend=fsdp:d8 cluster.n_nodes=5 : actor 8, "
            "critic 8 (colocated with actor), ref 8 (colocated with actor), rollout 8 | 16 of 40 GPUs",
            f"#1 \"actor.backend='{HYBRID}'\" cluster.n_nodes=5 : actor 32, "
            "critic 32 (colocated with actor), ref 32 (colocated with actor), rollout 8 | 40 of 40 GPUs",
        ]

    def test_dry_run_still_rejects_bad_jobs(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        runner = sweep(
            hydra_sweep_runner,
            app_dir,
            ["actor.backend=fsdp:d8,fsdp:d16", "hydra.launcher.dry_run=true"],
            tmp_path / "sweep",
            Recorder(),
        )
        with pytest.raises(ConfigCompositionException, match=r"#1 actor.backend=fsdp:d16"):
            runner.__enter__()

    def test_inner_launcher_cannot_be_areal(
        self, hydra_sweep_runner: TSweepRunner, app_dir: Path, tmp_path: Path
    ) -> None:
        task = Recorder()
        runner = sweep(
            hydra_sweep_runner,
            app_dir,
            ["actor.backend=fsdp:d8", "hydra/launcher@hydra.launcher.launcher=areal"],
            tmp_path / "sweep",
            task,
        )
        with pytest.raises(ConfigCompositionException, match="cannot be the areal launcher"):
            runner.__enter__()
        assert task.calls == []


# --------------------------------------------------------------- composition


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    "choice, target",
    [
        (None, "hydra._internal.core_plugins.basic_launcher.BasicLauncher"),
        ("basic", "hydra._internal.core_plugins.basic_launcher.BasicLauncher"),
        ("joblib", "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
        (
            "submitit_local",
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
        ),
        (
            "submitit_slurm",
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
        ),
    ],
)
def test_inner_launcher_is_chosen_by_package_override(
    app_dir: Path, choice: str | None, target: str
) -> None:
    if choice and choice != "basic":
        pytest.importorskip(target.rsplit(".", 2)[0])
    overrides = ["hydra/launcher=areal"]
    if choice:
        overrides.append(f"hydra/launcher@hydra.launcher.launcher={choice}")
    with initialize_config_dir(config_dir=str(app_dir / "conf"), **VERSION_BASE):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"
    assert launcher._recursive_ is False
    assert launcher.dry_run is False
    assert launcher.launcher._target_ == target
    if choice == "submitit_slurm":
        # the real plugin's config; its interpolations resolve from the new position
        assert launcher.launcher.submitit_folder == f"{cfg.hydra.sweep.dir}/.submitit/%j"
        assert "partition" in launcher.launcher


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    "overrides, target",
    [
        (
            ["hydra/launcher=areal_joblib"],
            "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
        ),
        (
            ["hydra/launcher=areal_submitit_slurm"],
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
        ),
        (
            ["hydra/launcher=areal_submitit_local"],
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
        ),
        # a short name, switched back to the basic inner launcher from the command line
        (
            ["hydra/launcher=areal_joblib", "hydra/launcher@hydra.launcher.launcher=basic"],
            "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
        ),
    ],
)
def test_short_names_choose_the_inner_launcher(
    app_dir: Path, overrides: list[str], target: str
) -> None:
    if "basic" not in target:
        pytest.importorskip(target.rsplit(".", 2)[0])
    with initialize_config_dir(config_dir=str(app_dir / "conf"), **VERSION_BASE):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    assert (
        cfg.hydra.launcher._target_
        == "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"
    )
    assert cfg.hydra.launcher.launcher._target_ == target


@pytest.mark.usefixtures("hydra_restore_singletons")
@pytest.mark.parametrize(
    "pinned, command_line, target",
    [
        # an app that pins an inner launcher in its defaults list ...
        (
            "  - override hydra/launcher: areal_joblib\n",
            ["hydra/launcher=areal"],
            "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
        ),
        (
            "  - override hydra/launcher: areal\n"
            "  - override hydra/launcher@hydra.launcher.launcher: joblib\n",
            ["hydra/launcher@hydra.launcher.launcher=basic"],
            "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
        ),
        # ... and the other way round
        (
            "  - override hydra/launcher: areal\n",
            ["hydra/launcher=areal_joblib"],
            "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
        ),
    ],
)
def test_a_pinned_inner_launcher_is_switched_from_the_command_line(
    app_dir: Path, pinned: str, command_line: list[str], target: str
) -> None:
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    config = app_dir / "conf" / "config.yaml"
    config.write_text("defaults:\n  - _self_\n" + pinned + config.read_text())
    with initialize_config_dir(config_dir=str(app_dir / "conf"), **VERSION_BASE):
        cfg = compose("config", overrides=command_line, return_hydra_config=True)
    assert (
        cfg.hydra.launcher._target_
        == "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"
    )
    assert cfg.hydra.launcher.launcher._target_ == target


def test_dataclass_defaults_to_basic_launcher() -> None:
    conf = AReaLLauncherConf()
    assert conf.launcher == {
        "_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    }
    assert conf._recursive_ is False and conf.dry_run is False


@pytest.mark.parametrize(
    "cfg, expected",
    [
        ({"actor": {"backend": "fsdp:d8"}}, True),
        ({"allocation_mode": ""}, True),
        ({"actor": "???"}, True),  # missing: validate reports it
        ({"foo": 10, "bar": 100}, False),  # Hydra's test apps: passed through
        ({}, False),
    ],
)
def test_only_areal_configs_are_validated(cfg: dict[str, Any], expected: bool) -> None:
    assert _core.is_areal_config(DictConfig(cfg)) is expected


class StandInLoader:
    """Picklable stand-in for Hydra's ConfigLoaderImpl (whose config sources are
    re-created by Hydra's plugin scan, which plain pickle does not follow); composing a
    job gives back the master config it was asked to compose against."""

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> Any:
        return master_config


def test_precomposed_loader_pickles_without_the_job_configs() -> None:
    """joblib and submitit pickle the Hydra context (and the master config the inner
    launcher passes) to their workers: the kept job configs must not travel with it, and
    a job is still composed against the master with hydra/launcher=areal."""
    inner: Any = StandInLoader()
    master, areal_master = DictConfig({"launcher": "inner"}), DictConfig({"launcher": "areal"})
    sweep = SweepLoader(inner, areal_master)
    sweep.keep(["a=1"], DictConfig({"a": 1}))
    wrapped = _handover.PrecomposedLoader(inner, master, areal_master, sweep)
    assert wrapped.load_sweep_config(master, ["a=1"]) == {"a": 1}  # composed for validation
    assert sweep.kept_jobs == 0  # handed out once
    assert wrapped.load_sweep_config(master, ["a=1"]) == {"launcher": "areal"}
    sweep.keep(["a=1"], DictConfig({"a": 1}))
    restored_master, restored, restored_sweep = pickle.loads(pickle.dumps((master, wrapped, sweep)))
    assert isinstance(restored_sweep, StandInLoader)  # the plain loader, nothing kept
    assert restored.load_sweep_config(restored_master, ["a=1"]) == {"launcher": "areal"}
    other = DictConfig({"launcher": "other"})
    assert restored.load_sweep_config(other, ["a=1"]) == {"launcher": "other"}


@pytest.mark.parametrize(
    "sweeper_form, shown",
    [
        ("actor.backend=fsdp\\:d8", "actor.backend=fsdp:d8"),
        ("actor.backend=d4t2", "actor.backend=d4t2"),
        (f"actor.backend='{HYBRID}'", f"\"actor.backend='{HYBRID}'\""),
        ("+a=0", "+a=0"),
        ("db=mysql", "db=mysql"),
        ("allocation_mode=''", "\"allocation_mode=''\""),
        ("allocation_mode=sglang\\:d4t2+fsdp\\:d8", "allocation_mode=sglang:d4t2+fsdp:d8"),
        ("x=[1,2]", '"x=[1,2]"'),
        ("x='$HOME'", "'x='\"'\"'$HOME'\"'\"''"),
        ("x=a\\ b", '"x=a b"'),  # Hydra reads an inner blank without the escape too
        ("x=a\\,b", "'x=a\\,b'"),  # a comma needs the escape: kept as Hydra wrote it
        ("~a.b=null", '"~a.b"'),  # the basic sweeper's form of a deletion ~a.b
        ("~a.b=1", '"~a.b=1"'),  # deleted only if it is 1: kept
    ],
)
def test_overrides_are_shown_as_typed(sweeper_form: str, shown: str) -> None:
    assert job_overrides_line([sweeper_form]) == shown


# --------------------------------------------------------------- plugin module weight


@pytest.mark.e2e
def test_plugin_module_is_light() -> None:
    code = textwrap.dedent(
        """
        import sys
        import hydra_plugins.areal_conf_plugin.areal_launcher
        heavy = sorted(m for m in sys.modules
                       if m.startswith("areal_conf") or m.endswith("areal_conf_plugin._core"))
        print(heavy)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.e2e
def test_info_plugins_lists_areal(train: Train) -> None:
    out = train("--info", "plugins")
    assert out.returncode == 0, out.stderr
    # the plugin list; Hydra's timing table below it omits modules faster than 0.5 ms
    assert "\t\tAReaLLauncher\n" in out.stdout


# --------------------------------------------------------------- real launchers


def run_app(app: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return run_python(app / "app.py", *args, cwd=app)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "inner, extra",
    [
        ("joblib", ["hydra.launcher.launcher.n_jobs=2"]),
        ("submitit_local", ["hydra.launcher.launcher.timeout_min=5"]),
    ],
)
def test_real_multirun_through_inner_launcher(
    app_dir: Path, tmp_path: Path, inner: str, extra: list[str]
) -> None:
    pytest.importorskip(f"hydra_plugins.hydra_{inner.split('_')[0]}_launcher")
    sweep_dir = tmp_path / "sweep"
    args = [
        "-m",
        "actor.backend=fsdp:d8,fsdp:d4t2",
        "hydra/launcher=areal",
        f"hydra/launcher@hydra.launcher.launcher={inner}",
        f"hydra.sweep.dir={sweep_dir}",
        *extra,
    ]
    out = run_app(app_dir, args)
    assert out.returncode == 0, out.stderr
    assert job_dirs(sweep_dir)[-2:] == ["0", "1"]
    for num, backend in ((0, "fsdp:d8"), (1, "fsdp:d4t2")):
        # joblib and submitit run the jobs in worker processes: each job leaves its mark
        assert (sweep_dir / str(num) / "task.txt").read_text() == f"TASK RAN {num} {backend}"
        assert (sweep_dir / str(num) / ".hydra" / "config.yaml").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("inner", ["joblib", "submitit_local"])
def test_real_inner_launcher_runs_nothing_on_a_bad_job(
    app_dir: Path, tmp_path: Path, inner: str
) -> None:
    pytest.importorskip(f"hydra_plugins.hydra_{inner.split('_')[0]}_launcher")
    sweep_dir = tmp_path / "sweep"
    out = run_app(
        app_dir,
        [
            "-m",
            "actor.backend=fsdp:d8,d4t2",
            "hydra/launcher=areal",
            f"hydra/launcher@hydra.launcher.launcher={inner}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
    )
    assert out.returncode != 0
    assert "#1 actor.backend=d4t2" in out.stderr
    assert "Traceback" not in out.stderr
    assert "TASK RAN" not in out.stdout
    assert job_dirs(sweep_dir) == []


# --------------------------------------------------------------- train.py end to end


@pytest.mark.e2e
def test_train_sweep_with_bare_dims_runs_nothing(train: Train, sweep_dir: Path) -> None:
    out = train(
        "-m",
        "actor.backend=fsdp:d8,d4t2,fsdp:d4t2",
        "hydra/launcher=areal",
    )
    assert out.returncode != 0
    assert "#1 actor.backend=d4t2" in out.stderr
    assert "no backend prefix" in out.stderr
    assert "#0" not in out.stderr and "#2" not in out.stderr
    assert "Traceback" not in out.stderr
    assert job_dirs(sweep_dir) == []
    assert "plan written" not in out.stdout
    assert "GPUs:" not in out.stdout  # no plan table: the task never ran


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("launcher", "warnings"),
    [pytest.param("areal", 0, id="validating"), pytest.param("basic", 1, id="plain")],
)
def test_train_sweep_of_valid_jobs_runs_every_job(
    train: Train, sweep_dir: Path, launcher: str, warnings: int
) -> None:
    """Either launcher runs both jobs; only a plain one says, once, that it did not
    validate them first and names the launcher that does."""
    out = train("-m", "actor.backend=fsdp:d8,fsdp:d4t2", f"hydra/launcher={launcher}")
    assert out.returncode == 0, out.stderr
    assert job_dirs(sweep_dir) == ["0", "1"]
    for num in (0, 1):
        assert (sweep_dir / str(num) / "allocation_plan.json").exists()
    assert out.stdout.count("plan written") == 2
    logs = out.stdout + out.stderr
    assert logs.count("which does not validate it first") == warnings
    assert logs.count("To check every job before any starts, use hydra/launcher=areal\n") == (
        warnings
    )


@pytest.mark.parametrize(
    "choice, fix",
    [
        ("joblib", "hydra/launcher=areal_joblib"),
        ("submitit_slurm", "hydra/launcher=areal_submitit_slurm"),
        ("my_launcher", "hydra/launcher=areal hydra/launcher@hydra.launcher.launcher=my_launcher"),
    ],
)
def test_the_plain_launcher_warning_names_the_validating_equivalent(
    monkeypatch: pytest.MonkeyPatch, choice: str, fix: str
) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from areal_conf.hydra.task import unvalidated_sweep_warning

    def hydra_cfg(num: int, target: str, mode: RunMode = RunMode.MULTIRUN) -> Any:
        return OmegaConf.create(
            {
                "mode": mode,
                "job": {"num": num},
                "launcher": {"_target_": target},
                "runtime": {"choices": {"hydra/launcher": choice}},
            }
        )

    monkeypatch.setattr(HydraConfig, "initialized", staticmethod(lambda: True))
    for cfg, expected in [
        (hydra_cfg(0, "x.Plain"), True),
        (hydra_cfg(1, "x.Plain"), False),  # once per sweep: job #0 says it
        (hydra_cfg(0, "x.Plain", RunMode.RUN), False),
        (hydra_cfg(0, "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"), False),
    ]:
        monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda cfg=cfg: cfg))
        warning = unvalidated_sweep_warning()
        assert (warning is not None) == expected
        if warning is not None:
            assert f"launched by hydra/launcher={choice}," in warning
            assert warning.endswith(f"use {fix}")


@pytest.mark.e2e
def test_train_dry_run_prints_both_jobs_and_runs_neither(train: Train, sweep_dir: Path) -> None:
    out = train(
        "-m",
        "actor.backend=fsdp:d8,fsdp:d4t2",
        "hydra/launcher=areal",
        "hydra.launcher.dry_run=true",
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("#")]
    assert lines == [
        "#0 actor.backend=fsdp:d8 : actor 8, critic 8 (colocated with actor), "
        "ref 8 (colocated with actor), rollout 8 | 16 of 16 GPUs",
        "#1 actor.backend=fsdp:d4t2 : actor 8, critic 8 (colocated with actor), "
        "ref 8 (colocated with actor), rollout 8 | 16 of 16 GPUs",
    ]
    assert job_dirs(sweep_dir) == []
    assert "plan written" not in out.stdout


@pytest.mark.e2e
def test_train_dry_run_of_the_quoted_hybrid_form(train: Train, sweep_dir: Path) -> None:
    out = train(
        "-m",
        f"actor.backend=fsdp:d8,'{HYBRID}'",
        "cluster.n_nodes=5",
        "hydra/launcher=areal",
        "hydra.launcher.dry_run=true",
    )
    assert out.returncode == 0, out.stderr
    assert f"#1 \"actor.backend='{HYBRID}'\" cluster.n_nodes=5 : actor 32" in out.stdout
    assert "| 40 of 40 GPUs" in out.stdout


@pytest.mark.e2e
def test_train_sweep_rejects_allocation_mode_in_every_job(train: Train, sweep_dir: Path) -> None:
    out = train(
        "-m",
        "actor.backend=fsdp:d8,fsdp:d4t2",
        "allocation_mode=sglang:d4t2+fsdp:d8",
        "hydra/launcher=areal",
    )
    assert out.returncode != 0
    assert "2 of 2 jobs failed validation" in out.stderr
    assert out.stderr.count(TRANSLATION) == 2
    assert job_dirs(sweep_dir) == []


#: Sweeps with bad jobs, each composed another way: from the shared base (value-only
#: jobs), by Hydra in full (a config group in the job), or not at all (Hydra's error).
BAD_JOB_SWEEPS = {
    "value-only jobs": (
        ["actor.backend=fsdp:d8,d4t2,fsdp:d4t2"],
        ["#1 actor.backend=d4t2"],
    ),
    "jobs with a config group": (
        ["+experiment=ppo_separate_critic", "actor.backend=fsdp:d8,d4t2"],
        ["#1 +experiment=ppo_separate_critic actor.backend=d4t2"],
    ),
    "a job Hydra cannot compose": (
        ["cluster.n_nodes=2,many"],
        ["#1 cluster.n_nodes=many", "    Hydra could not compose this job: "],
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("overrides, named", BAD_JOB_SWEEPS.values(), ids=BAD_JOB_SWEEPS.keys())
def test_a_bad_job_is_named_whatever_composed_it(
    train: Train, sweep_dir: Path, overrides: list[str], named: list[str]
) -> None:
    out = train("-m", *overrides)
    assert out.returncode != 0
    assert "1 of " in out.stderr and "failed validation; no job was launched." in out.stderr
    lines = out.stderr.splitlines()
    for line in named:
        assert any(x.startswith(line) for x in lines), (line, out.stderr)
    assert "Traceback" not in out.stderr
    assert job_dirs(sweep_dir) == []


# --------------------------------------------------------------- adaptive sweepers


def optuna_sweep(app: Path, sweep_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    return run_app(
        app,
        [
            "-m",
            "hydra/launcher=areal",
            "hydra/sweeper=optuna",
            "hydra.sweeper.sampler.seed=1",
            "hydra.sweeper.n_trials=6",
            "hydra.sweeper.n_jobs=6",
            "actor.backend=choice(fsdp:d8,d4t2)",
            f"hydra.sweep.dir={sweep_dir}",
            *extra,
        ],
    )


@pytest.mark.e2e
def test_optuna_gets_invalid_jobs_back_as_failed_trials(app_dir: Path, tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    out = optuna_sweep(app_dir, sweep_dir, "hydra.sweeper.max_failure_rate=1.0")
    assert out.returncode == 0, out.stderr
    ran = [line for line in out.stdout.splitlines() if line.startswith("TASK RAN")]
    failed = [
        line for line in out.stdout.splitlines() if "failed validation and was not run" in line
    ]
    assert ran and failed and len(ran) + len(failed) == 6
    assert all(line.endswith("fsdp:d8") for line in ran)
    assert all("actor.backend=d4t2 failed validation" in line for line in failed)
    # the valid jobs keep their global numbers, the invalid ones have no directory
    numbers = sorted(int(line.split()[2]) for line in ran)
    assert [d for d in job_dirs(sweep_dir)] == [str(n) for n in numbers]
    assert "Best value: 1.0" in out.stdout
    assert "Traceback" not in out.stderr


@pytest.mark.e2e
def test_optuna_failure_budget_applies_to_invalid_jobs(app_dir: Path, tmp_path: Path) -> None:
    # Optuna's default max_failure_rate is 0: the first invalid job ends the study with
    # our message, which claims only that this job was not run.
    out = optuna_sweep(app_dir, tmp_path / "sweep")
    assert out.returncode != 0
    assert "failed validation and was not run:" in out.stderr
    assert "no backend prefix" in out.stderr
    assert "no job was launched" not in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.e2e
def test_on_invalid_stop_with_an_adaptive_sweeper_says_what_ran(
    app_dir: Path, tmp_path: Path
) -> None:
    out = optuna_sweep(app_dir, tmp_path / "sweep", "hydra.launcher.on_invalid=stop")
    assert out.returncode != 0
    assert "in this batch failed validation" in out.stderr or "no job was launched" in out.stderr
    assert "TASK RAN" not in out.stdout  # the only batch was refused as a whole
    assert "Traceback" not in out.stderr


@pytest.mark.e2e
def test_on_invalid_rejects_unknown_values(app_dir: Path, tmp_path: Path) -> None:
    out = run_app(
        app_dir,
        [
            "-m",
            "hydra/launcher=areal",
            "hydra.launcher.on_invalid=skip",
            "actor.backend=fsdp:d8",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
    )
    assert out.returncode != 0
    assert "hydra.launcher.on_invalid='skip' is not one of auto, stop, fail_job" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.e2e
def test_tab_completion_offers_the_short_names() -> None:
    env = user_env(COMP_LINE="python train.py hydra/launcher=areal")
    out = run_python("train.py", "-sc", "query=bash", env=env)
    assert out.returncode == 0, out.stderr
    offered = out.stdout.split()
    for name in ("areal", "areal_joblib", "areal_submitit_local", "areal_submitit_slurm"):
        assert f"hydra/launcher={name}" in offered


@pytest.mark.e2e
def test_train_batched_sweep_with_a_bad_last_job_runs_nothing(
    train: Train, sweep_dir: Path
) -> None:
    # the command: one job per batch, the bad job last
    out = train(
        "-m",
        "actor.backend=fsdp:d8,fsdp:d4t2,d4t2",
        "hydra.sweeper.max_batch_size=1",
    )
    assert out.returncode == 2
    assert "areal launcher: 1 of 3 jobs of the sweep failed validation; no job was launched." in (
        out.stderr
    )
    assert "\n#2 actor.backend=d4t2\n" in out.stderr
    assert "Traceback" not in out.stderr
    assert job_dirs(sweep_dir) == []
    assert "plan written" not in out.stdout

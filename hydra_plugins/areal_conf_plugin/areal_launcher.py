"""The ``areal`` launcher: validate every job of a batch, then hand the batch on.

``hydra/launcher=areal`` composes each job of a multirun batch, checks it with
``areal_conf.validate.validate`` (the same check as ``train.py``) and only then gives
the batch to an *inner* launcher: Hydra's basic launcher by default, or any installed
launcher plugin selected with the package override
``hydra/launcher@hydra.launcher.launcher=<name>`` (``joblib``, ``submitit_local``,
``submitit_slurm``, ...), or in one go with the short names ``hydra/launcher=areal_joblib``,
``areal_submitit_local``, ``areal_submitit_slurm``, ``areal_ray``.
``hydra.launcher.dry_run=true`` validates and prints the allocation of every job without
launching any.

Hydra imports every public module under ``hydra_plugins`` at each application start,
so this module holds only the config dataclass, its ConfigStore entry and a thin
Launcher class; the work is in ``_core`` (not scanned: its name starts with ``_``),
imported when ``launch`` runs.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn
    from hydra.types import HydraContext, TaskFunction
    from omegaconf import DictConfig

#: ``_target_`` of this launcher (also used by ``_core`` to refuse nesting it in itself).
TARGET = "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"


@dataclass
class AReaLLauncherConf:
    """``hydra/launcher=areal``.

    ``launcher`` is the inner launcher's config.  It is filled from Hydra's own
    ``hydra/launcher`` group by the defaults entry below, so any launcher plugin that
    registers itself there can be chosen with
    ``hydra/launcher@hydra.launcher.launcher=joblib`` (on the command line) or
    ``- override hydra/launcher@hydra.launcher.launcher: joblib`` (in a defaults list),
    and tuned with ``hydra.launcher.launcher.n_jobs=4`` etc.
    """

    _target_: str = TARGET
    # The inner launcher config has its own _target_: it must reach AReaLLauncher as a
    # config, not be instantiated by Hydra on the way in.
    _recursive_: bool = False
    defaults: list[Any] = field(
        default_factory=lambda: ["_self_", {"/hydra/launcher@launcher": "basic"}]
    )
    launcher: Any = field(
        default_factory=lambda: {
            "_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
        }
    )
    # Validate and print each job's allocation, launch nothing.
    dry_run: bool = False
    # What an invalid job does: "stop" the sweep before any job of it runs (the whole
    # sweep is validated first when the sweeper knows it up front), or "fail_job": the
    # job comes back to the sweeper as failed, carrying the message, and the valid jobs
    # run (adaptive sweepers such as Optuna count it against their failure budget).
    # "auto": stop for Hydra's basic sweeper and areal_layouts, fail_job otherwise.
    on_invalid: str = "auto"


#: Short names: ``hydra/launcher=areal_<inner>`` is ``hydra/launcher=areal`` with that
#: inner launcher, so the validating path is as short as the plain one and shows up in
#: tab completion next to it. The inner plugin must be installed (joblib and submitit:
#: ``pip install 'areal-conf[launchers]'``; ray: ``hydra-ray-launcher``).
INNER_ALIASES = ("joblib", "submitit_local", "submitit_slurm", "ray")

ConfigStore.instance().store(
    group="hydra/launcher", name="areal", node=AReaLLauncherConf, provider="areal_conf"
)
for _inner in INNER_ALIASES:
    ConfigStore.instance().store(
        group="hydra/launcher",
        name=f"areal_{_inner}",
        node=AReaLLauncherConf(defaults=["_self_", {"/hydra/launcher@launcher": _inner}]),
        provider="areal_conf",
    )


class AReaLLauncher(Launcher):
    """Validates a whole batch with areal_conf, then delegates it to the inner launcher."""

    def __init__(
        self, launcher: Any = None, dry_run: bool = False, on_invalid: str = "auto"
    ) -> None:
        self.launcher_config: Any = launcher
        self.dry_run = bool(dry_run)
        self.on_invalid = on_invalid
        # The whole sweep, when a sweeper announces it (see expect_sweep), and what has
        # been validated and launched so far: a launcher sees one batch at a time.
        self.sweep_jobs: list[list[str]] | None = None
        self.sweep_checked = False
        self.launched = 0
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(
        self,
        *,
        hydra_context: "HydraContext",
        task_function: "TaskFunction",
        config: "DictConfig",
    ) -> None:
        self.config = config
        self.task_function = task_function
        self.hydra_context = hydra_context

    def expect_sweep(self, job_overrides: Sequence[Sequence[str]]) -> None:
        """Called by a sweeper that knows every job before the first batch (areal_layouts):
        the whole sweep is then validated before the first batch is launched."""
        self.sweep_jobs = [list(o) for o in job_overrides]
        self.sweep_checked = False

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence["JobReturn"]:
        from hydra_plugins.areal_conf_plugin import _core

        return _core.launch(
            launcher=self, job_overrides=job_overrides, initial_job_idx=initial_job_idx
        )

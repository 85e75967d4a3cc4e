"""The ``areal`` launcher: validate every job of a batch, then hand the batch on.

``hydra/launcher=areal`` composes each job of a multirun batch, checks it with
``areal_conf.validate.validate`` (the same check as ``train.py``) and only then gives
the batch to an *inner* launcher: Hydra's basic launcher by default, or any installed
launcher plugin selected with the package override
``hydra/launcher@hydra.launcher.launcher=<name>`` (``joblib``, ``submitit_local``,
``submitit_slurm``, ...).  ``hydra.launcher.dry_run=true`` validates and prints the
allocation of every job without launching any.

Hydra imports every public module under ``hydra_plugins`` at each application start,
so this module holds only a thin Launcher class. Its config dataclass is in
``_configs`` and becomes ``hydra/launcher=areal`` through ``areal_configs`` when an
application first selects it; the work is in ``_core``, imported when ``launch`` runs
(modules whose name starts with ``_`` are not scanned).
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hydra.plugins.launcher import Launcher

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn
    from hydra.types import HydraContext, TaskFunction
    from omegaconf import DictConfig

#: ``_target_`` of this launcher (also used by ``_core`` to refuse nesting it in itself).
TARGET = "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"


class AReaLLauncher(Launcher):
    """Validates a whole batch with areal_conf, then delegates it to the inner launcher."""

    def __init__(self, launcher: Any = None, dry_run: bool = False) -> None:
        self.launcher_config: Any = launcher
        self.dry_run = bool(dry_run)
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

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence["JobReturn"]:
        from hydra_plugins.areal_conf_plugin import _core

        return _core.launch(
            launcher=self, job_overrides=job_overrides, initial_job_idx=initial_job_idx
        )

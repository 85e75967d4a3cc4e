"""The ``areal`` launcher: validate every job of a batch, then hand the batch on.

``hydra/launcher=areal`` composes each job of a multirun batch, checks it with
``areal_conf.validation.validate`` (the same check as ``train.py``) and only then gives
the batch to an *inner* launcher: Hydra's basic launcher by default, or any installed
launcher plugin selected with the package override
``hydra/launcher@hydra.launcher.launcher=<name>`` (``joblib``, ``submitit_local``,
``submitit_slurm``, ...), or in one go with the short names ``hydra/launcher=areal_joblib``,
``areal_submitit_local``, ``areal_submitit_slurm``, ``areal_ray``.
``hydra.launcher.dry_run=true`` validates and prints the allocation of every job without
launching any.

Hydra imports every public module under ``hydra_plugins`` at each application start,
so this module holds only a thin Launcher class. Its config dataclass is in
``_configs`` and becomes ``hydra/launcher=areal`` through ``areal_configs`` when an
application first selects it; the work is in ``_core``, imported when the launcher is
set up (modules whose name starts with ``_`` are not scanned).
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hydra.plugins.launcher import Launcher

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn
    from hydra.types import HydraContext, TaskFunction
    from omegaconf import DictConfig

#: ``_target_`` of this launcher (also used by ``_core`` to refuse nesting it in itself):
#: its own dotted name, which the core knows as ``areal_conf.hydra_names.LAUNCHER_TARGET``
#: (a test holds the two equal; nothing of the core is imported at Hydra's discovery).
TARGET = f"{__name__}.AReaLLauncher"


class AReaLLauncher(Launcher):
    """Validates a whole batch with areal_conf, then delegates it to the inner launcher."""

    def __init__(
        self,
        launcher: Any = None,
        dry_run: bool = False,
        on_invalid: str = "auto",
        config_root: str = "",
    ) -> None:
        self.launcher_config: Any = launcher
        self.dry_run = bool(dry_run)
        self.on_invalid = on_invalid
        self.config_root = str(config_root or "")
        from hydra_plugins.areal_conf_plugin._sweep_state import SweepState

        # What it knows of the sweep, which only _core writes.
        self.sweep = SweepState()
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
        from hydra_plugins.areal_conf_plugin import _core, _handover

        _core.check_sweeper_sizes(config)
        _core.install_loader(self, hydra_context)
        _handover.write_sweep_record_atomically(config)

    def expect_sweep(self, job_overrides: Sequence[Sequence[str]]) -> None:
        """Called by a sweeper that knows every job before the first batch (areal_layouts):
        the whole sweep is then validated before the first batch is launched."""
        self.sweep.expect(job_overrides)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence["JobReturn"]:
        from hydra_plugins.areal_conf_plugin import _core

        return _core.launch(
            launcher=self, job_overrides=job_overrides, initial_job_idx=initial_job_idx
        )

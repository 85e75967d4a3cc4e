"""The ``areal_layouts`` sweeper: one job per valid layout of an engine.

``python train.py -m hydra/sweeper=areal_layouts hydra.sweeper.engine=actor
hydra.sweeper.backend=fsdp`` runs one job per fsdp layout of the actor's current world
size, each job with ``actor.backend=<layout>``; other sweep overrides on the command line
(``cluster.n_nodes=2,3``) or in ``hydra.sweeper.params`` are crossed with the layouts as
Hydra's basic sweeper crosses them. The layouts are recomputed for each combination of
the other overrides, from that combination's composed config, so a swept ``model`` field
or experiment changes them accordingly. The jobs go through whatever launcher is
configured (``hydra/launcher=areal`` validates every job first).
``hydra.sweeper.rank=step_time hydra.sweeper.top_k=3`` runs only the 3 layouts of each
combination with the fastest predicted training step.

Hydra imports every public module under ``hydra_plugins`` at each application start, so
this module holds only a thin Sweeper class. Its config dataclass is in ``_configs`` and
becomes ``hydra/sweeper=areal_layouts`` through ``areal_configs`` when an application
first selects it; the work is in ``_sweeper_core``, imported when a sweep runs.
"""

from typing import TYPE_CHECKING

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override


class AReaLLayoutsSweeper(BasicSweeper):
    """Hydra's basic sweeper with one more axis: the valid layouts of ``engine``.

    Only the expansion of the sweep overrides into batches of jobs differs; the sweep
    loop (``multirun.yaml``, composing each batch, launching, results) is the basic
    sweeper's.
    """

    def __init__(
        self,
        engine: str = "actor",
        backend: str | None = None,
        gpus: int | None = None,
        max_tp: int | None = None,
        max_batch_size: int | None = None,
        params: dict[str, str] | None = None,
        max_jobs: int | None = 1000,
        fits: bool = False,
        rank: str | None = None,
        top_k: int | None = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.max_jobs = max_jobs
        self.engine = engine
        self.backend = backend
        self.gpus = gpus
        self.max_tp = max_tp
        self.fits = fits
        self.rank = rank
        self.top_k = top_k

    # BasicSweeper.sweep calls this as self.split_arguments(...) with the parsed overrides
    # (its params, then the command line); a static method in BasicSweeper, an instance
    # method here because the layouts depend on the sweeper's settings and config.
    def split_arguments(  # type: ignore[override]
        self, overrides: "list[Override]", max_batch_size: int | None
    ) -> list[list[list[str]]]:
        """The batches of jobs: the basic sweeper's combinations × the engine's layouts."""
        from hydra_plugins.areal_conf_plugin import _sweeper_core

        return _sweeper_core.layout_batches(self, overrides, max_batch_size)

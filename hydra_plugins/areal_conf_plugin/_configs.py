"""The config dataclasses of ``hydra/launcher=areal`` and ``hydra/sweeper=areal_layouts``.

Not scanned by Hydra (the name starts with ``_``): creating dataclasses costs every Hydra
app about a millisecond, so they are imported only when an application selects the
launcher or the sweeper, through ``areal_configs``, which builds them into configs.
"""

from dataclasses import dataclass, field
from typing import Any

from hydra_plugins.areal_conf_plugin.areal_launcher import TARGET


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
    # Where the AReaL config (its engine sections and cluster) sits in each job's config,
    # as a dotted key: "" for the top level, "areal" for a defaults entry
    # `- areal_schema@areal`. A job with no engine sections there is not validated, and
    # the launcher says so.
    config_root: str = ""


def _with_inner(inner: str) -> AReaLLauncherConf:
    return AReaLLauncherConf(defaults=["_self_", {"/hydra/launcher@launcher": inner}])


#: Short names: ``hydra/launcher=areal_<inner>`` is ``hydra/launcher=areal`` with that
#: inner launcher (the names are listed in ``areal_conf.hydra_names.INNER_ALIASES``). The inner
#: plugin must be installed (joblib, submitit and ray: ``pip install 'areal-conf[launchers]'``).
AREAL_JOBLIB = _with_inner("joblib")
AREAL_SUBMITIT_LOCAL = _with_inner("submitit_local")
AREAL_SUBMITIT_SLURM = _with_inner("submitit_slurm")
AREAL_RAY = _with_inner("ray")


LAYOUTS_SWEEPER_TARGET = "hydra_plugins.areal_conf_plugin.areal_layouts_sweeper.AReaLLayoutsSweeper"


@dataclass
class AReaLLayoutsSweeperConf:
    """``hydra/sweeper=areal_layouts``; null fields take their value from the config."""

    _target_: str = LAYOUTS_SWEEPER_TARGET
    # The engine whose `<engine>.backend` the sweep sets (rollout, actor, critic, ref, teacher).
    engine: str = "actor"
    # Backend name to sweep (fsdp, megatron, ...); null: the engine's current backend.
    backend: str | None = None
    # World size of every layout; null: the engine's current world size.
    gpus: int | None = None
    # Largest tp (and expert tp); null: cluster.n_gpus_per_node.
    max_tp: int | None = None
    # Refuse a sweep of more jobs than this (null: no limit); the message says how many.
    max_jobs: int | None = 1000
    # Keep only layouts whose memory per GPU fits cluster.gpu_memory_gb, smallest first
    # (needs the model shape: model.hf_config or the model section's sizes).
    fits: bool = False
    # null: the layouts' own order (or smallest memory first with fits); step_time: by
    # predicted seconds of a training step, fastest first, the layouts that fit first
    # (needs the model shape and train_dataset.batch_size; the GPU is AREAL_CONF_GPU's,
    # else an H100).
    rank: str | None = None
    # Keep only the first top_k layouts of each combination, after rank (needs rank).
    top_k: int | None = None
    # As in the basic sweeper: jobs per launcher batch (null: all in one batch) ...
    max_batch_size: int | None = None
    # ... and sweep overrides kept in the config, e.g. {cluster.n_nodes: "2,3"}.
    params: dict[str, str] | None = None

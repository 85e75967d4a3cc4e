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


@dataclass
class AReaLLayoutsSweeperConf:
    """``hydra/sweeper=areal_layouts``; null fields take their value from the config."""

    _target_: str = "hydra_plugins.areal_conf_plugin.areal_layouts_sweeper.AReaLLayoutsSweeper"
    # The engine whose `<engine>.backend` the sweep sets (rollout, actor, critic, ref, teacher).
    engine: str = "actor"
    # Backend name to sweep (fsdp, megatron, ...); null: the engine's current backend.
    backend: str | None = None
    # World size of every layout; null: the engine's current world size.
    gpus: int | None = None
    # Largest tp (and expert tp); null: cluster.n_gpus_per_node.
    max_tp: int | None = None
    # As in the basic sweeper: jobs per launcher batch (null: all in one batch) ...
    max_batch_size: int | None = None
    # ... and sweep overrides kept in the config, e.g. {cluster.n_nodes: "2,3"}.
    params: dict[str, str] | None = None

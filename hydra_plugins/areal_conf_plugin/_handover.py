"""Handing a validated sweep over: the inner launcher and the configs it gets, and the
sweep's record (``multirun.yaml``) written in one step."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any, ClassVar

from hydra.core.config_loader import ConfigLoader
from hydra.core.plugins import Plugins
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hydra_plugins.areal_conf_plugin._compose import DelegatingLoader, SweepLoader
from hydra_plugins.areal_conf_plugin.areal_launcher import TARGET

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


# ------------------------------------------------------------------ the sweep's record

#: The file Hydra's sweepers (the basic one and ``areal_layouts``, which inherits its
#: loop) save the sweep's config to, in ``hydra.sweep.dir``.
SWEEP_RECORD = "multirun.yaml"


def write_sweep_record_atomically(config: DictConfig) -> None:
    """Have the sweep's ``multirun.yaml`` written in one step (``write_atomic``).

    ``BasicSweeper.sweep`` (Hydra 1.3 and 1.4 alike) saves it with
    ``OmegaConf.save(config, sweep_dir / "multirun.yaml")``, which truncates the file
    and writes it in place, inline in the sweep loop: no hook, option or config of Hydra
    changes how. The sweeper sets this launcher up right before it saves the record, and
    launches nothing before; so from here until that save (or this launcher's first
    batch, whichever comes first) ``OmegaConf.save`` writes that one file through
    :func:`~areal_conf.files.write_atomic`, with the same text, and is Hydra's own again
    at once. Every other save goes to OmegaConf unchanged.
    """
    sweep_dir = OmegaConf.select(config, "hydra.sweep.dir", default=None)
    if isinstance(sweep_dir, str) and sweep_dir:
        SweepRecord.arm(os.path.abspath(os.path.join(sweep_dir, SWEEP_RECORD)))


class SweepRecord:
    """``OmegaConf.save`` while the sweep's record is awaited (see above). OmegaConf's
    own attribute is kept in a dict: a staticmethod kept as a class attribute here would
    come back unwrapped."""

    path: str | None = None
    hydra_save: ClassVar[
        dict[str, Any]
    ] = {}  # "attribute": OmegaConf's staticmethod, while replaced

    @classmethod
    def arm(cls, path: str) -> None:
        cls.disarm()
        cls.path = path
        cls.hydra_save["attribute"] = OmegaConf.__dict__["save"]
        OmegaConf.save = staticmethod(cls.save)  # type: ignore[method-assign]

    @classmethod
    def disarm(cls) -> None:
        if "attribute" in cls.hydra_save:
            OmegaConf.save = cls.hydra_save.pop("attribute")  # type: ignore[method-assign]
        cls.path = None

    @classmethod
    def save(cls, config: Any, f: Any, resolve: bool = False) -> None:
        if not isinstance(f, (str, os.PathLike)) or os.path.abspath(f) != cls.path:
            cls.hydra_save["attribute"].__func__(config, f, resolve)
            return
        cls.disarm()
        from areal_conf.hydra.plugin_api import write_atomic

        write_atomic(f, OmegaConf.to_yaml(config, resolve=resolve))


# ------------------------------------------------------------------ delegation


def inner_launcher_config(config: DictConfig, launcher_config: Any) -> Any:
    """The inner launcher's config (``hydra.launcher.launcher``), checked."""
    inner = launcher_config
    if inner is None:
        inner = OmegaConf.select(config, "hydra.launcher.launcher", default=None)
    if inner is None:
        return OmegaConf.create({"_target_": BASIC_LAUNCHER})
    target = inner.get("_target_") if hasattr(inner, "get") else None
    if not isinstance(target, str) or not target:
        raise ConfigCompositionException(
            "areal launcher: hydra.launcher.launcher has no _target_; choose the inner "
            "launcher with e.g. hydra/launcher@hydra.launcher.launcher=basic"
        )
    if target == TARGET or is_areal_launcher(target):
        raise ConfigCompositionException(
            "areal launcher: the inner launcher (hydra.launcher.launcher) cannot be the "
            "areal launcher itself; choose e.g. hydra/launcher@hydra.launcher.launcher=basic"
        )
    return inner


def with_launcher(config: DictConfig, inner: Any) -> DictConfig:
    """A copy of the master config whose ``hydra.launcher`` is the inner launcher's, so
    that the inner launcher sees its own config where Hydra puts it."""
    inner_master = copy.deepcopy(config)
    with read_write(inner_master.hydra), open_dict(inner_master.hydra):
        inner_master.hydra.launcher = inner
    return inner_master


def is_areal_launcher(target: str) -> bool:
    # By name: Hydra's plugin scan re-executes the module, so class objects may differ.
    clazz = Plugins.instance().class_name_to_class.get(target)
    return isinstance(clazz, type) and any(
        f"{c.__module__}.{c.__qualname__}" == TARGET for c in clazz.__mro__
    )


class PrecomposedLoader(DelegatingLoader):
    """The inner launcher's config loader: a job of the sweep is the config composed
    and validated for it (kept by the :class:`SweepLoader`), handed out once, or else
    composed by it. Pickled (joblib, submitit), it is a plain loader for the workers.

    A job the inner launcher asks for is composed against ``areal_master`` (the master
    config with ``hydra/launcher=areal``), not against the master it passes (which carries
    its own launcher config): the job composes with ``hydra/launcher=areal`` too, and
    Hydra 1.4 rejects a job whose launcher config differs from its master's.
    """

    def __init__(
        self,
        inner: ConfigLoader,
        master: DictConfig,
        areal_master: DictConfig,
        sweep: SweepLoader | None = None,
    ) -> None:
        self.inner = inner
        self._master = master
        self._areal_master = areal_master
        self._sweep = sweep

    def __reduce__(self) -> tuple[Callable[..., ConfigLoader], Any]:
        return PrecomposedLoader, (self.inner, self._master, self._areal_master)

    def load_sweep_config(
        self, master_config: DictConfig, sweep_overrides: list[str]
    ) -> DictConfig:
        if master_config is not self._master:
            return self.inner.load_sweep_config(master_config, sweep_overrides)
        if self._sweep is None:
            return self.inner.load_sweep_config(self._areal_master, sweep_overrides)
        taken = self._sweep.take(sweep_overrides)
        return self._sweep.compose(sweep_overrides) if taken is None else taken

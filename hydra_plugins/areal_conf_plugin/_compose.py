"""Job configs of a sweep, composed once each, and cheaply when Hydra's rules allow.

Hydra composes a sweep job from scratch (defaults list, every config file, the schema)
for each job, and the basic sweeper composes every job once more to check that it can
(``Sweeper.validate_batch_is_legal``): about 0.1 s a job, twice. :class:`SweepLoader`
stands in for Hydra's config loader in the ``areal`` launcher's sweep:

* A job whose overrides only set values (no config-group choice, no ``hydra.*`` key, no
  package) is composed from one composition of the sweep's base config (the master's
  Hydra overrides and no job override) with the job's overrides applied by Hydra's own
  code, with Hydra's bookkeeping (``hydra.overrides.task``, ``hydra.job.override_dirname``,
  the resolver cache) redone. Anything else, or anything that fails on this path, is
  composed by Hydra, which gives its own result or its own error.
* What it composed is kept (pickled, within a memory budget) until the launcher takes it,
  so a job validated once is launched from the same composition, and the sweeper's check
  of a batch reads the kept copy instead of composing again.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hydra.core.config_loader import ConfigLoader
from hydra.core.object_type import ObjectType
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from hydra.types import RunMode

#: Pickled job configs kept for the launcher, at most this many bytes (a composed
#: AReaL config pickles to some 20 KB); beyond it a job is composed again when asked for.
KEEP_BYTES = 256 * 2**20

#: What an unpicklable config (kept as it is) is counted as.
UNPICKLABLE_BYTES = 200 * 2**10


class _Kept:
    """One composed job config, pickled when it can be (a fresh copy per restore)."""

    __slots__ = ("config", "data", "size", "sweep")

    def __init__(self, config: DictConfig, sweep: bool = False) -> None:
        self.sweep = sweep
        try:
            self.data: bytes | None = pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
            self.config: DictConfig | None = None
            self.size = len(self.data)
        except Exception:  # a structured config of a class pickle cannot name
            self.data = None
            self.config = config
            self.size = UNPICKLABLE_BYTES

    def restore(self) -> DictConfig:
        if self.data is not None:
            restored: DictConfig = pickle.loads(self.data)
            return restored
        assert self.config is not None
        return copy.deepcopy(self.config)


class ValueOverrides:
    """Composes job configs of one master config: value-only jobs from a shared base."""

    def __init__(self, loader: ConfigLoader, master: DictConfig) -> None:
        self.loader = loader
        self.master = master
        self._base: _Kept | None = None
        self._literal_dirname = False
        self._group_exists: Callable[[str], bool] | None = None
        self._ready = False
        self._usable = False
        self.shortcuts = 0  # jobs composed from the base (for tests and benchmarks)

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The job config, as ``load_sweep_config(master, overrides)`` gives it."""
        parsed = self.value_only(overrides)
        if parsed is not None:
            try:
                cfg = self._apply(parsed)
            except Exception:  # Hydra composes it and says what is wrong, in its words
                pass
            else:
                self.shortcuts += 1
                return cfg
        return self.loader.load_sweep_config(self.master, list(overrides))

    def value_only(self, overrides: Sequence[str]) -> list[Override] | None:
        """The parsed overrides when each one only sets, adds or deletes a config value;
        None when the job needs Hydra's full composition."""
        if not self._setup():
            return None
        from hydra.core.override_parser.overrides_parser import OverridesParser

        try:
            parsed = OverridesParser.create().parse_overrides(list(overrides))
        except Exception:
            return None
        assert self._group_exists is not None
        for override in parsed:
            key = override.key_or_group
            if (
                override.package is not None
                or override.is_sweep_override()
                or key == "hydra"
                or override.is_hydra_override()
                or self._group_exists(key)
            ):
                return None
        return parsed

    def _setup(self) -> bool:
        """Compose the base once; False when this Hydra or this config rules the
        shortcut out (then every job is composed by Hydra)."""
        if self._ready:
            return self._usable
        self._ready = True
        try:
            from hydra._internal.config_loader_impl import ConfigLoaderImpl

            if not isinstance(self.loader, ConfigLoaderImpl):
                return False
            base = self.loader.load_sweep_config(self.master, [])
            # Hydra 1.4 expands override aliases of the primary config: not redone here.
            if OmegaConf.select(base, "hydra.aliases", default=None):
                return False
            self._literal_dirname = not OmegaConf.is_interpolation(
                base.hydra.job, "override_dirname"
            )
            if self._literal_dirname and _dirname_function() is None:
                return False
            master_hydra = [str(o) for o in self.master.hydra.overrides.hydra]
            _, repo = self.loader._parse_overrides_and_create_caching_repo(
                self.master.hydra.job.config_name, master_hydra
            )
            self._group_exists = repo.group_exists
        except Exception:
            return False
        self._base = _Kept(base)
        self._usable = True
        return True

    def _apply(self, parsed: list[Override]) -> DictConfig:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        assert self._base is not None
        cfg = self._base.restore()
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
        for override in parsed:
            cfg.hydra.overrides.task.append(override.input_line)
        if self._literal_dirname:
            dirname = _dirname_function()
            assert dirname is not None
            settings = cfg.hydra.job.config.override_dirname
            cfg.hydra.job.override_dirname = dirname(
                overrides=parsed,
                kv_sep=settings.kv_sep,
                item_sep=settings.item_sep,
                exclude_keys=settings.exclude_keys,
            )
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
        return cfg


def _dirname_function() -> Callable[..., str] | None:
    """Hydra's ``get_overrides_dirname`` where the loader computes the directory name
    (1.3, 1.4.0.dev1); newer Hydra makes it an interpolation and has none."""
    from hydra._internal import config_loader_impl

    return getattr(config_loader_impl, "get_overrides_dirname", None)


class DelegatingLoader(ConfigLoader):
    """A config loader that hands everything but ``load_sweep_config`` to ``inner``."""

    inner: ConfigLoader

    def load_configuration(
        self,
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        return self.inner.load_configuration(
            config_name=config_name,
            overrides=overrides,
            run_mode=run_mode,
            from_shell=from_shell,
            validate_sweep_overrides=validate_sweep_overrides,
        )

    def get_search_path(self) -> Any:
        return self.inner.get_search_path()

    def get_sources(self) -> Any:
        return self.inner.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.inner.list_groups(parent_name)

    def get_group_options(
        self,
        group_name: str,
        results_filter: ObjectType | None = ObjectType.CONFIG,
        config_name: str | None = None,
        overrides: list[str] | None = None,
    ) -> list[str]:
        return self.inner.get_group_options(
            group_name,
            results_filter=results_filter,
            config_name=config_name,
            overrides=overrides,
        )

    def compute_defaults_list(
        self, config_name: str | None, overrides: list[str], run_mode: RunMode
    ) -> Any:
        return self.inner.compute_defaults_list(config_name, overrides, run_mode)

    def __getattr__(self, name: str) -> Any:
        # Anything else ConfigLoaderImpl offers (helpers some sweepers and launchers use).
        # Before ``inner`` is set (unpickling, copying) every other name is missing too.
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class SweepLoader(DelegatingLoader):
    """Hydra's config loader for the ``areal`` launcher's sweep: job configs of the
    master config are composed by :class:`ValueOverrides` and kept until taken.

    ``before_job`` is called with a job's overrides before it is handed out (the
    launcher checks the whole sweep there when the sweeper asks for its first job).
    Pickled (joblib, submitit ship the context to other processes), it is Hydra's own
    loader again.
    """

    def __init__(self, inner: ConfigLoader, master: DictConfig) -> None:
        self.inner = inner
        self.master = master
        self.composer = ValueOverrides(inner, master)
        self.before_job: Callable[[list[str]], None] | None = None
        self._kept: dict[tuple[str, ...], list[_Kept]] = {}
        self._kept_bytes = 0
        self.keep_bytes = KEEP_BYTES

    def __reduce__(self) -> tuple[Callable[..., Any], Any]:
        return _plain_loader, (self.inner,)

    # -------------------------------------------------------------- the sweep's jobs

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """Compose a job of the master config (nothing kept)."""
        return self.composer.compose(overrides)

    def keep(self, overrides: Sequence[str], config: DictConfig, *, sweep: bool = False) -> bool:
        """Keep a composed job config for :meth:`take`; False when over the budget.
        ``sweep``: kept from the check of the whole sweep, for a later batch too (else it
        is let go of at the end of the batch, see :meth:`release_unclaimed`)."""
        if self._kept_bytes >= self.keep_bytes:
            return False
        kept = _Kept(config, sweep)
        self._kept.setdefault(tuple(overrides), []).append(kept)
        self._kept_bytes += kept.size
        return True

    def peek(self, overrides: Sequence[str]) -> DictConfig | None:
        """A copy of the kept config of a job, which stays kept; None if none is."""
        kept = self._kept.get(tuple(overrides))
        return kept[0].restore() if kept else None

    def take(self, overrides: Sequence[str]) -> DictConfig | None:
        """The kept config of a job (the oldest of equal jobs), no longer kept."""
        key = tuple(overrides)
        kept = self._kept.get(key)
        if not kept:
            return None
        first = kept.pop(0)
        if not kept:
            del self._kept[key]
        self._kept_bytes -= first.size
        return first.restore()

    def release(self, overrides: Sequence[str]) -> None:
        """Let go of what is kept of a job's config (a dry run launches nothing)."""
        kept = self._kept.pop(tuple(overrides), [])
        self._kept_bytes -= sum(k.size for k in kept)

    def release_unclaimed(self) -> None:
        """Let go of every config not kept for a later batch of the sweep."""
        for key in [key for key, kept in self._kept.items() if not any(k.sweep for k in kept)]:
            self.release(key)

    @property
    def kept_jobs(self) -> int:
        return sum(len(kept) for kept in self._kept.values())

    # -------------------------------------------------------------- ConfigLoader

    def load_sweep_config(
        self, master_config: DictConfig, sweep_overrides: list[str]
    ) -> DictConfig:
        if master_config is not self.master:
            return self.inner.load_sweep_config(master_config, sweep_overrides)
        if self.before_job is not None:
            self.before_job(list(sweep_overrides))
        # A copy of what is kept (the caller, a sweeper's check, may change it); what is
        # composed here is kept for the launcher, which validates it next.
        kept = self.peek(sweep_overrides)
        if kept is not None:
            return kept
        config = self.compose(sweep_overrides)
        self.keep(sweep_overrides, config)
        return config


def _plain_loader(inner: ConfigLoader) -> ConfigLoader:
    return inner

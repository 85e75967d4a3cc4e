"""Every YAML file a Hydra composition loads goes through areal-conf's limits first.

Hydra loads a config file (the primary config, and every file its defaults list reaches:
``- ../math/gsm8k_grpo_megatron@_global_``, a config group's option) through the
``ConfigSource`` registered for the ``file://`` scheme in its ``SourcesRegistry``.
:func:`checked_yaml_files` puts :class:`FileConfigSource` there for the duration of a
block: it runs :func:`areal_conf.config.yaml_limits.check_yaml_file` on the file, then Hydra's
own loading. Only areal-conf's own entry points use it (``train.py`` and any application
through :func:`areal_conf.hydra.app.run_validated`, the CLI's composing in
:func:`areal_conf.hydra.explain.compose_file` and its sweeps); a Hydra application that merely
has areal-conf's plugin installed loads its files as Hydra does.

Hydra-facing: imports Hydra. The internals used (``SourcesRegistry.types``,
``FileConfigSource``, ``ConfigSource.path`` and ``_normalize_file_name``) are the same in
hydra-core 1.3 and 1.4; ``load_config``'s other arguments (1.1's ``is_primary_config``)
are passed on as given.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hydra._internal.core_plugins.file_config_source import (
    FileConfigSource as HydraFileConfigSource,
)
from hydra._internal.sources_registry import SourcesRegistry
from hydra.plugins.config_source import ConfigResult

from areal_conf.config.yaml_limits import check_yaml_file


class FileConfigSource(HydraFileConfigSource):
    """Hydra's ``file://`` config source, each file checked before it is loaded.

    Named as Hydra's class: ``SourcesRegistry.register`` refuses a scheme registered
    with a class of another name, and a plugin discovery that runs inside
    :func:`checked_yaml_files` registers Hydra's."""

    def load_config(self, config_path: str, *args: Any, **kwargs: Any) -> ConfigResult:
        full_path = os.path.realpath(
            os.path.join(self.path, self._normalize_file_name(config_path))
        )
        if os.path.isfile(full_path):  # else Hydra's own "Config not found"
            check_yaml_file(full_path)
        return super().load_config(config_path, *args, **kwargs)


@contextmanager
def checked_yaml_files() -> Iterator[None]:
    """Within the block, Hydra loads every ``file://`` config through
    :class:`FileConfigSource` (nested blocks keep it; the source before is put back)."""
    types = SourcesRegistry.instance().types
    before = types.get("file", HydraFileConfigSource)
    types["file"] = FileConfigSource
    try:
        yield
    finally:
        types["file"] = before

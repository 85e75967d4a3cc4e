"""Every test leaves Hydra's global state (GlobalHydra, ConfigStore, version_base) as it
found it, so tests that compose in-process cannot leak into Hydra's shipped suites."""

from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins


@pytest.fixture(scope="session", autouse=True)
def _discover_hydra_plugins() -> None:
    """Discover plugins once, before the first test saves Hydra's state.

    Hydra 1.4 imports plugin modules once per process (1.3 re-executes them at every
    discovery): state saved before the first discovery lacks what the plugins register
    (Hydra's own basic launcher and sweeper configs, the areal. resolvers), and restoring
    it would drop them for every later test."""
    Plugins.instance()


@pytest.fixture(autouse=True)
def _restore_hydra_singletons(hydra_restore_singletons: None) -> None:
    """Uses the fixture of Hydra's pytest plugin, which restores every Singleton."""

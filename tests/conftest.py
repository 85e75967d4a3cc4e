"""Every test leaves Hydra's global state (GlobalHydra, ConfigStore, version_base) as it
found it, so tests that compose in-process cannot leak into Hydra's shipped suites."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _restore_hydra_singletons(hydra_restore_singletons: None) -> None:
    """Uses the fixture of Hydra's pytest plugin, which restores every Singleton."""

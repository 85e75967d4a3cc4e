"""Fixtures every test module may use, and the guard that tests leave Hydra's global
state (GlobalHydra, ConfigStore, version_base) as they found it, so tests that compose
in-process cannot leak into each other or into Hydra's shipped suites.

Plain helpers (``ROOT``, ``run_train``, ``run_cli``, ...) are in ``_helpers.py``."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _helpers import Cli, Train, run_train
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton
from hydra.version import VersionBase
from hypothesis import settings
from omegaconf.basecontainer import BaseContainer

# Tests never hold code to a wall-clock time (benchmarks/ does): no per-example deadline,
# which a busy machine running the suite on every core would trip at random; each test's
# bound is pytest-timeout's.
settings.register_profile("areal-conf", deadline=None)
settings.load_profile("areal-conf")


@pytest.fixture(scope="session", autouse=True)
def _discover_hydra_plugins() -> None:
    """Discover plugins once, before the first test saves Hydra's state.

    Hydra 1.4 imports plugin modules once per process (1.3 re-executes them at every
    discovery): state saved before the first discovery lacks what the plugins register
    (Hydra's own basic launcher and sweeper configs, the areal. resolvers), and restoring
    it would drop them for every later test."""
    Plugins.instance()


#: areal-conf's own settings from the environment, and the GPUs visible to AReaL's local
#: scheduler; a test sets them when it means to.
AREAL_CONF_ENV = (
    "AREAL_CONF_AREAL_VERSION",
    "AREAL_CONF_GPU_MEMORY_GB",
    "AREAL_CONF_GPU",
    "AREAL_CONF_MODEL",
    "AREAL_CONF_MEAN_RESPONSE_TOKENS",
    "AREAL_CONF_DEVICE_DIR",
    "CUDA_VISIBLE_DEVICES",
)


@pytest.fixture(scope="session", autouse=True)
def _no_areal_conf_settings_from_outside(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The suite runs with the rules areal-conf picks by itself (no areal installed: the
    newest) unless a test chooses, whatever the shell that started pytest has set; and
    on a machine without GPUs, as CI is (the machine's devices are counted in an empty
    directory), so that the local scheduler's plans take cluster.n_gpus_per_node."""
    import os

    saved = {k: os.environ.pop(k) for k in AREAL_CONF_ENV if k in os.environ}
    os.environ["AREAL_CONF_DEVICE_DIR"] = str(tmp_path_factory.mktemp("no-gpus"))
    yield
    os.environ.pop("AREAL_CONF_DEVICE_DIR")
    os.environ.update(saved)


@pytest.fixture
def areal_1_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """AReaL 1.0's rules, chosen as a user does (``AREAL_CONF_AREAL_VERSION=1.0``), for
    this test and the programs it starts: for tests of behaviour that 1.0's rules state
    (the 2.0 rules have their own tests)."""
    monkeypatch.setenv("AREAL_CONF_AREAL_VERSION", "1.0")


def _hydra_fingerprint() -> tuple[object, ...]:
    """A cheap summary of Hydra's global state that changes when a test initializes
    Hydra, stores a config, registers a resolver or sets the version base."""
    instances = Singleton._instances
    store = instances.get(ConfigStore)
    stored: list[tuple[str, int]] = []
    folders = [("", store.repo if isinstance(store, ConfigStore) else {})]
    while folders:
        path, folder = folders.pop()
        for key, value in folder.items():
            if isinstance(value, dict):
                folders.append((f"{path}/{key}", value))
            else:
                stored.append((f"{path}/{key}", id(value)))
    global_hydra = instances.get(GlobalHydra)
    return (
        sorted(
            (kind.__qualname__, id(obj)) for kind, obj in instances.items() if kind is not Plugins
        ),
        isinstance(global_hydra, GlobalHydra) and global_hydra.is_initialized(),
        sorted(stored),
        sorted((name, id(resolver)) for name, resolver in BaseContainer._resolvers.items()),
        getattr(instances.get(VersionBase), "version_base", None),
    )


class _SavedHydraState(NamedTuple):
    state: dict[str, Any]  # Singleton.get_state(), a deep copy
    plugins: object  # the Plugins instance of that moment


def _restore(saved: _SavedHydraState) -> None:
    state = copy.deepcopy(saved.state)
    if Singleton._instances.get(Plugins) is not saved.plugins:
        Singleton.set_state(state)  # discovers the plugins again
        return
    # Singleton.set_state less its plugin discovery (a quarter of a second): the plugins
    # are the ones discovered before, so their registrations are in the saved state.
    Singleton._instances = {**state["instances"], Plugins: saved.plugins}
    BaseContainer._resolvers = state["omegaconf_resolvers"]


@pytest.fixture(scope="module", autouse=True)
def _hydra_state_of_the_module() -> Iterator[_SavedHydraState]:
    """Hydra's state before the module's first test."""
    saved = _SavedHydraState(Singleton.get_state(), Singleton._instances.get(Plugins))
    before = _hydra_fingerprint()
    yield saved
    if _hydra_fingerprint() != before:
        _restore(saved)


@pytest.fixture(autouse=True)
def _restore_hydra_state(_hydra_state_of_the_module: _SavedHydraState) -> Iterator[None]:
    """After a test that changed Hydra's state, put back the state the module started
    with (which every earlier test of the module also left). Copying the state for every
    test, as Hydra's own fixture does, costs about 50 ms a test; comparing costs µs."""
    before = _hydra_fingerprint()
    yield
    if _hydra_fingerprint() != before:
        _restore(_hydra_state_of_the_module)


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """Where the ``train`` fixture's multiruns put their job directories."""
    return tmp_path / "multi"


@pytest.fixture
def train(tmp_path: Path, sweep_dir: Path) -> Train:
    """``train(*args)`` runs ``python train.py *args`` from ``tmp_path``: a single run
    writes to ``tmp_path / "run"``, a multirun to ``sweep_dir``."""

    def train(*args: str) -> subprocess.CompletedProcess[str]:
        # after the caller's arguments: Hydra refuses overrides before options such as
        # --config-name (a later value of the same key wins, so these always do)
        places = (f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={sweep_dir}")
        return run_train(*args, *places, cwd=tmp_path)

    return train


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``cli(*argv)`` runs ``python -m areal_conf *argv`` in this process and returns its
    exit status, stdout and stderr."""

    from areal_conf.cli import main

    def cli(*argv: str) -> tuple[int, str, str]:
        status = main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return cli

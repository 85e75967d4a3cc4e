"""Fixtures every test module may use, and the guard that tests leave Hydra's global
state (GlobalHydra, ConfigStore, version_base) as they found it, so tests that compose
in-process cannot leak into each other or into Hydra's shipped suites.

Plain helpers (``ROOT``, ``run_train``, ``run_cli``, ...) are in ``_helpers.py``."""

from __future__ import annotations

import copy
import inspect
import re
import subprocess
import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from _helpers import Cli, Train, run_train
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton


@pytest.fixture(scope="session", autouse=True)
def _discover_hydra_plugins() -> None:
    """Discover plugins once, before the first test saves Hydra's state.

    Hydra 1.4 imports plugin modules once per process (1.3 re-executes them at every
    discovery): state saved before the first discovery lacks what the plugins register
    (Hydra's own basic launcher and sweeper configs, the areal. resolvers), and restoring
    it would drop them for every later test."""
    Plugins.instance()


# Words of a test module that can change Hydra's state in-process (composing, launching,
# the CLI's `explain --config`). Saving the state costs about 50 ms a test, so modules
# without them (the pure core) restore it once per module rather than after every test.
_STATE_CHANGING = re.compile(r"\b(compose|initialize|GlobalHydra|ConfigStore|launch|cli)\b")


@cache
def _changes_hydra_state(module: types.ModuleType) -> bool:
    return _STATE_CHANGING.search(inspect.getsource(module)) is not None


def _saved_hydra_state() -> Iterator[None]:
    state = copy.deepcopy(Singleton.get_state())
    yield
    Singleton.set_state(state)


@pytest.fixture(scope="module", autouse=True)
def _restore_hydra_state_per_module() -> Iterator[None]:
    yield from _saved_hydra_state()


@pytest.fixture(autouse=True)
def _restore_hydra_state_per_test(request: pytest.FixtureRequest) -> Iterator[None]:
    if _changes_hydra_state(request.module):
        yield from _saved_hydra_state()
    else:
        yield


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

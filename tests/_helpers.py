"""What many test modules share: where the checkout is, and how to run its programs
(``train.py``, ``python -m areal_conf``, any Python code, a shell pipeline) in a
subprocess as a user runs them.

Plain functions, importable by name (``from _helpers import ROOT, run_train``);
``conftest.py`` builds its fixtures on them.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
CONF = ROOT / "conf"
TRAIN = ROOT / "train.py"

# One bound for every subprocess: far above the slowest (train.py sweeping 20 layouts,
# 46 s on a loaded 2-core machine), so a slow machine passes and a hung child fails its
# test instead of stalling the whole run.
SUBPROCESS_TIMEOUT = 300

# the type of the ``train`` fixture: ``train(*args)`` runs train.py with ``args``
Train = Callable[..., subprocess.CompletedProcess[str]]
# the type of the ``cli`` fixture: ``cli(*argv)`` is (exit status, stdout, stderr)
Cli = Callable[..., tuple[int, str, str]]


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell, plus ``extra``: this checkout first on
    ``PYTHONPATH`` (children import this worktree's ``areal_conf`` and ``hydra_plugins``),
    and no ``HYDRA_FULL_ERROR``, which would turn the one-line messages under test into
    tracebacks."""
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    paths = [str(ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def run_python(
    *argv: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python *argv`` in ``cwd``, output captured as text, exit status not checked."""
    return subprocess.run(
        [sys.executable, *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=user_env() if env is None else env,
        timeout=SUBPROCESS_TIMEOUT,
    )


def run_train(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python train.py *args`` in ``cwd``: Hydra writes any output directory that
    ``args`` do not place under ``cwd`` (prefer the ``train`` fixture, which places both
    the run and the sweep directory in the test's ``tmp_path``)."""
    return run_python(TRAIN, *args, cwd=cwd)


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -m areal_conf *args`` in ``cwd``."""
    return run_python("-m", "areal_conf", *args, cwd=cwd)


def run_shell(command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """A shell command line (pipes, redirections) in ``cwd``; ``python`` at its start is
    this interpreter."""
    if command.startswith("python "):
        command = f"{sys.executable} {command.removeprefix('python ')}"
    return subprocess.run(
        command,
        shell=True,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=user_env(),
        timeout=SUBPROCESS_TIMEOUT,
    )


def compose_config(
    *overrides: str, config_dir: Path = CONF, name: str = "config", with_hydra: bool = False
) -> DictConfig:
    """What Hydra's compose API makes of config ``name`` in ``config_dir`` with
    ``overrides``; ``with_hydra`` keeps the ``hydra`` node (launcher and sweeper choices)."""
    # imported here: modules that test the core without Hydra import this file too
    from hydra import compose, initialize_config_dir

    from areal_conf.hydra.compat import VERSION_BASE

    with initialize_config_dir(config_dir=str(config_dir), **VERSION_BASE):
        return compose(name, overrides=list(overrides), return_hydra_config=with_hydra)


@functools.cache
def hydra_composes_parent_paths() -> bool:
    """Whether the installed Hydra composes a defaults entry such as
    ``- ../math/gsm8k_grpo_megatron@_global_`` (AReaL's pin 1.4.0.dev1 and Hydra 1.3 do;
    1.4.0rc3 refuses it). Found out by composing such a pair of files."""
    import tempfile

    from hydra.errors import ConfigCompositionException

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "base").mkdir()
        (Path(tmp) / "base" / "parent.yaml").write_text("x: 1\n")
        (Path(tmp) / "child").mkdir()
        (Path(tmp) / "child" / "config.yaml").write_text(
            "defaults:\n  - ../base/parent@_global_\n  - _self_\n"
        )
        try:
            compose_config(config_dir=Path(tmp) / "child")
        except ConfigCompositionException:
            return False
    return True


def job_dirs(sweep_dir: Path) -> list[str]:
    """The names of the job directories a multirun left in ``sweep_dir`` (none when it
    does not exist)."""
    if not sweep_dir.exists():
        return []
    return sorted(p.name for p in sweep_dir.iterdir() if p.is_dir())


def with_overrides(cfg: Any, overrides: Sequence[str]) -> DictConfig:
    """``cfg`` (a mapping or a DictConfig, not changed) with Hydra ``overrides`` applied
    as Hydra applies a command line's: ``key=value`` sets a key the config has (and fails
    for one it lacks), ``+key`` adds one, ``++key`` adds or sets. Hydra's own parser and
    override application, on a copy in struct mode as Hydra composes it."""
    import copy

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import DictConfig, OmegaConf

    config = copy.deepcopy(cfg) if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    OmegaConf.set_struct(config, True)
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    ConfigLoaderImpl._apply_overrides_to_config(parsed, config)
    return config


def fixes_in(hint: str) -> list[list[str]]:
    """The overrides of each fix a memory error's hint gives: ``this would fit: <overrides>
    (GB per GPU: ...)`` and ``or <overrides>: training engines leave the GPUs ...``."""
    import re
    import shlex

    found = [shlex.split(m) for m in re.findall(r"this would fit: (.*?) \(GB per GPU", hint)]
    found += [shlex.split(m) for m in re.findall(r"(?:^|; )or (\+\+enable_offload=\S*.*?): ", hint)]
    return found

"""Help for the task function of a Hydra application that runs AReaL configs.

Hydra-facing (imports Hydra when called); the core modules never import it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def unvalidated_sweep_warning() -> str | None:
    """In job #0 of a multirun whose launcher is not the validating ``areal`` one (the
    user chose e.g. ``hydra/launcher=joblib``): what to tell the user, once per sweep.
    ``None`` in every other case (a single run, a later job, a validated sweep)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from areal_conf.hydra_names import LAUNCHER_TARGET

    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN or hydra_cfg.job.num != 0:
        return None
    if hydra_cfg.launcher.get("_target_") == LAUNCHER_TARGET:
        return None
    choice = hydra_cfg.runtime.choices.get("hydra/launcher") or "basic"
    fix = " ".join(validating_launcher(choice))
    return (
        f"this sweep was launched by hydra/launcher={choice}, which does not validate it "
        "first: each job checks its own allocation only when it runs. To check every job "
        f"before any starts, use {fix}"
    )


def validating_launcher(choice: str) -> list[str]:
    """The overrides that launch through the validating launcher what the launcher
    ``choice`` (a name of Hydra's ``hydra/launcher`` group) would launch: ``basic`` is
    ``hydra/launcher=areal``, an inner launcher with a short name ``areal_<name>``, any
    other ``areal`` with it as the inner launcher; an ``areal`` choice stays."""
    from areal_conf.hydra_names import INNER_ALIASES

    if choice == "areal" or choice.startswith("areal_"):
        return [f"hydra/launcher={choice}"]
    if choice == "basic":
        return ["hydra/launcher=areal"]
    if choice in INNER_ALIASES:  # it has a short hydra/launcher=areal_<name>
        return [f"hydra/launcher=areal_{choice}"]
    return ["hydra/launcher=areal", f"hydra/launcher@hydra.launcher.launcher={choice}"]


def app_config_path(default: str, argv: Sequence[str] | None = None) -> str | None:
    """The ``config_path`` for ``@hydra.main``: ``default``, unless the command line
    names a config directory of its own (``--config-dir``/``-cd``).

    Hydra searches the application's config directory before the one given with
    ``--config-dir``, so ``--config-dir examples/hermes --config-name config`` would
    compose the application's own ``config.yaml`` instead of the user's. Without the
    application's directory in the search path the user's file is the one found; the
    configs that areal-conf's plugin provides (``areal_schema``, the launchers) stay
    available.
    """
    args = sys.argv[1:] if argv is None else argv
    for arg in args:
        if arg in ("--config-dir", "-cd") or arg.startswith(("--config-dir=", "-cd=")):
            return None
        if arg.startswith("-cd") and len(arg) > 3:  # -cdDIR
            return None
    return default

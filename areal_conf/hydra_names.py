"""Names areal-conf's Hydra plugin registers, which the core also needs to recognise:
defined here, in the core, so that the core never imports the plugin and the plugin
reads them from one place."""

from __future__ import annotations

from typing import Final

#: ``_target_`` of the validating launcher (``hydra/launcher=areal``).
LAUNCHER_TARGET: Final = "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"

#: ``hydra/launcher=areal_<inner>``: the areal launcher with that inner launcher, so the
#: validating path is as short as the plain one and tab completion shows it.
INNER_ALIASES: Final = ("joblib", "submitit_local", "submitit_slurm", "ray")

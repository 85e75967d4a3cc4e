"""What the Hydra plugin (``hydra_plugins.areal_conf_plugin``) uses of the core, and nothing
else: the one module it imports besides ``areal_conf`` and ``areal_conf.hydra_names``
(a test holds it), so that the core's modules can move without touching the plugin.

Plugin modules are imported by every Hydra app on the machine, so each name here is
imported from its module on first use, not when this module is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from areal_conf.lazy import exports_on_first_use

if TYPE_CHECKING:
    from areal_conf.advise.sweeps import (
        EngineSweep,
        check_ranking,
        check_sweep_sizes,
        engine_layouts,
        swept_keys,
    )
    from areal_conf.areal.versions import choose_rules
    from areal_conf.config.override_keys import missing_key, refused_override
    from areal_conf.config.reading import has_engines
    from areal_conf.errors import ErrorAtKey
    from areal_conf.files import write_atomic
    from areal_conf.hydra.app import NOTHING_STARTED, Interrupted
    from areal_conf.hydra.job_overrides import job_overrides_line, user_override
    from areal_conf.hydra.resolvers import alloc, engine_allocation, world_size
    from areal_conf.overrides import hydra_value
    from areal_conf.plan.report import seconds_text
    from areal_conf.progress import Progress
    from areal_conf.settings import default_settings

_EXPORTS = {
    "EngineSweep": "areal_conf.advise.sweeps",
    "swept_keys": "areal_conf.advise.sweeps",
    "check_ranking": "areal_conf.advise.sweeps",
    "check_sweep_sizes": "areal_conf.advise.sweeps",
    "engine_layouts": "areal_conf.advise.sweeps",
    "choose_rules": "areal_conf.areal.versions",
    "missing_key": "areal_conf.config.override_keys",
    "refused_override": "areal_conf.config.override_keys",
    "ErrorAtKey": "areal_conf.errors",
    "has_engines": "areal_conf.config.reading",
    "write_atomic": "areal_conf.files",
    "NOTHING_STARTED": "areal_conf.hydra.app",
    "Interrupted": "areal_conf.hydra.app",
    "job_overrides_line": "areal_conf.hydra.job_overrides",
    "user_override": "areal_conf.hydra.job_overrides",
    "alloc": "areal_conf.hydra.resolvers",
    "engine_allocation": "areal_conf.hydra.resolvers",
    "world_size": "areal_conf.hydra.resolvers",
    "hydra_value": "areal_conf.overrides",
    "seconds_text": "areal_conf.plan.report",
    "Progress": "areal_conf.progress",
    "default_settings": "areal_conf.settings",
}


#: What the plugin may use; each is imported from its module when first asked for.
__all__ = [
    "NOTHING_STARTED",
    "EngineSweep",
    "ErrorAtKey",
    "Interrupted",
    "Progress",
    "alloc",
    "check_ranking",
    "check_sweep_sizes",
    "choose_rules",
    "default_settings",
    "engine_allocation",
    "engine_layouts",
    "has_engines",
    "hydra_value",
    "job_overrides_line",
    "missing_key",
    "refused_override",
    "seconds_text",
    "swept_keys",
    "user_override",
    "world_size",
    "write_atomic",
]


# Read from its module at each use (not kept here), as the plugin's own function-level
# imports are: a name replaced there is replaced here too.
__getattr__ = exports_on_first_use(__name__, _EXPORTS)

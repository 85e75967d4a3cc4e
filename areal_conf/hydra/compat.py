"""What differs between the Hydra versions areal-conf supports (hydra-core 1.3.2 … 1.4.x,
pre-releases included) for an application's entry point. (The OmegaConf difference, how
to register a resolver, is handled where the resolvers are registered:
``hydra_plugins.areal_conf_plugin.areal_configs``.)

Detected by the feature itself, not by a version number: AReaL pins a 1.4 development
release (1.4.0.dev1) that still behaves like 1.3 here.
"""

from __future__ import annotations

from typing import Any

import hydra.errors

#: Keyword arguments for ``hydra.main``, ``initialize`` and ``initialize_config_dir`` that
#: select Hydra's current defaults on every supported version. Hydra 1.3 (and 1.4 up to
#: 1.4.0.dev6) falls back to 1.1's defaults when ``version_base`` is omitted (the job
#: changes into its output directory) and warns; ``version_base=None`` selects the current
#: ones. From 1.4.0.dev8 on, Hydra always uses its current defaults and warns
#: (``Hydra15MigrationWarning``, introduced with that change) when ``version_base`` is
#: passed at all. Either way: no warning, and the job runs where it was started.
VERSION_BASE: dict[str, Any] = (
    {} if hasattr(hydra.errors, "Hydra15MigrationWarning") else {"version_base": None}
)

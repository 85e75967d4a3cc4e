"""areal-conf: per-engine backend strings for AReaL-style RL training, parsed and planned.

The core imports no Hydra: text → ModelAllocation → plan. Hydra-facing code lives in
``areal_conf.config``, ``areal_conf.resolvers`` and ``hydra_plugins/``.
"""

from areal_conf.allocation import ModelAllocation, ParallelStrategy
from areal_conf.app import run_validated
from areal_conf.errors import AllocationError
from areal_conf.layouts import layouts
from areal_conf.legacy import migrate_allocation_mode
from areal_conf.mesh import rank_groups
from areal_conf.parser import parse_backend

# The function, not the module: importing the submodule here first means the package
# attribute `validate` is bound to the function below and stays so (`from areal_conf
# import validate` and `from areal_conf.validate import validate` give the same object).
from areal_conf.validate import validate

__all__ = [
    "AllocationError",
    "ModelAllocation",
    "ParallelStrategy",
    "layouts",
    "migrate_allocation_mode",
    "parse_backend",
    "rank_groups",
    "run_validated",
    "validate",
]

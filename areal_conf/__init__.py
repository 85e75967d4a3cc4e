"""areal-conf: per-engine backend strings for AReaL-style RL training, parsed and planned.

The core imports no Hydra: text → ModelAllocation → plan. Hydra-facing code lives in
``areal_conf.config``, ``areal_conf.resolvers`` and ``hydra_plugins/``.
"""

from areal_conf.allocation import ModelAllocation, ParallelStrategy
from areal_conf.errors import AllocationError
from areal_conf.layouts import layouts
from areal_conf.legacy import migrate_allocation_mode
from areal_conf.mesh import rank_groups
from areal_conf.parser import parse_backend

__all__ = [
    "AllocationError",
    "ModelAllocation",
    "ParallelStrategy",
    "layouts",
    "migrate_allocation_mode",
    "parse_backend",
    "rank_groups",
]

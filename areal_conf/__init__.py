"""areal-conf: per-engine backend strings for AReaL-style RL training, parsed and planned.

The core imports no Hydra: text → ModelAllocation → plan. Hydra-facing code lives in
``areal_conf.hydra.resolvers``, ``areal_conf.hydra.compat`` and ``hydra_plugins/``;
``areal_conf.hydra.structured`` holds the schema's dataclasses.

The names below are imported on first use, so that a module of this package (the
``areal.`` resolvers when a Hydra config first uses one, the schema's dataclasses when an
app loads ``areal_schema``) costs only what it needs. No module is named like one of
these names, so ``areal_conf.validate`` and ``areal_conf.layouts`` are always the
functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from areal_conf.lazy import exports_on_first_use

if TYPE_CHECKING:
    from areal_conf.command.check import check_command
    from areal_conf.config.run_reading import Reading
    from areal_conf.errors import AllocationError, BackendSyntaxError, ConfigError
    from areal_conf.hydra.app import run_validated
    from areal_conf.model.hardware import HARDWARE, Hardware
    from areal_conf.perf.decode import DecodeThroughput, RequestLengths, decode_throughput
    from areal_conf.perf.memory import MemoryEstimate
    from areal_conf.perf.ranking import RankedLayout, RLSplit, rank_layouts, rl_split
    from areal_conf.perf.rl_step import Calibration, RLStep
    from areal_conf.perf.step_time import StepTime, step_time
    from areal_conf.plan.plan import EnginePlan, Plan
    from areal_conf.settings import Settings
    from areal_conf.spec.allocation import ModelAllocation, ParallelStrategy
    from areal_conf.spec.layouts import layouts
    from areal_conf.spec.legacy import migrate_allocation_mode
    from areal_conf.spec.mesh import rank_groups
    from areal_conf.spec.parser import parse_backend
    from areal_conf.validation import (
        Validation,
        read_run,
        rl_throughput,
        validate,
        validate_run,
    )

_EXPORTS = {
    "AllocationError": "areal_conf.errors",
    "BackendSyntaxError": "areal_conf.errors",
    "ConfigError": "areal_conf.errors",
    "Settings": "areal_conf.settings",
    "Reading": "areal_conf.config.run_reading",
    "Plan": "areal_conf.plan.plan",
    "EnginePlan": "areal_conf.plan.plan",
    "MemoryEstimate": "areal_conf.perf.memory",
    "DecodeThroughput": "areal_conf.perf.decode",
    "RequestLengths": "areal_conf.perf.decode",
    "RankedLayout": "areal_conf.perf.ranking",
    "RLSplit": "areal_conf.perf.ranking",
    "HARDWARE": "areal_conf.model.hardware",
    "Hardware": "areal_conf.model.hardware",
    "StepTime": "areal_conf.perf.step_time",
    "decode_throughput": "areal_conf.perf.decode",
    "rank_layouts": "areal_conf.perf.ranking",
    "rl_split": "areal_conf.perf.ranking",
    "step_time": "areal_conf.perf.step_time",
    "ModelAllocation": "areal_conf.spec.allocation",
    "ParallelStrategy": "areal_conf.spec.allocation",
    "check_command": "areal_conf.command.check",
    "layouts": "areal_conf.spec.layouts",
    "migrate_allocation_mode": "areal_conf.spec.legacy",
    "parse_backend": "areal_conf.spec.parser",
    "rank_groups": "areal_conf.spec.mesh",
    "run_validated": "areal_conf.hydra.app",
    "validate": "areal_conf.validation",
    "read_run": "areal_conf.validation",
    "validate_run": "areal_conf.validation",
    "Validation": "areal_conf.validation",
    "rl_throughput": "areal_conf.validation",
    "Calibration": "areal_conf.perf.rl_step",
    "RLStep": "areal_conf.perf.rl_step",
}

__all__ = [
    "HARDWARE",
    "AllocationError",
    "BackendSyntaxError",
    "Calibration",
    "ConfigError",
    "DecodeThroughput",
    "EnginePlan",
    "Hardware",
    "MemoryEstimate",
    "ModelAllocation",
    "ParallelStrategy",
    "Plan",
    "RLSplit",
    "RLStep",
    "RankedLayout",
    "Reading",
    "RequestLengths",
    "Settings",
    "StepTime",
    "Validation",
    "check_command",
    "decode_throughput",
    "layouts",
    "migrate_allocation_mode",
    "parse_backend",
    "rank_groups",
    "rank_layouts",
    "read_run",
    "rl_split",
    "rl_throughput",
    "run_validated",
    "step_time",
    "validate",
    "validate_run",
]


__getattr__ = exports_on_first_use(__name__, _EXPORTS, keep_in=globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

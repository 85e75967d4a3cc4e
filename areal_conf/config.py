"""Structured configs for the engines, cluster and model (SPEC §5).

``AReaLConfig`` is the ``areal_schema`` config (use it first in a primary config's
defaults list). Nothing needs to import this module for that: the installed plugin
(``hydra_plugins.areal_conf_plugin.areal_configs``) serves ``areal_schema`` to every Hydra
app and builds it from these dataclasses the first time an app loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Resolved lazily: composition never parses, `--cfg job --resolve` and cfg access do.
ALLOCATION = "${areal.allocation:}"


@dataclass
class SchedulingStrategy:
    # "separation" (own GPUs) or "colocation" (share `target`'s GPUs); checked by validate.
    type: str = "separation"
    target: str | None = None


@dataclass
class RolloutConfig:
    backend: str = ""
    scheduling_strategy: SchedulingStrategy = field(default_factory=SchedulingStrategy)
    allocation: Any = ALLOCATION


@dataclass
class TrainEngineConfig:
    backend: str = ""
    scheduling_strategy: SchedulingStrategy = field(default_factory=SchedulingStrategy)
    allocation: Any = ALLOCATION


def _colocated_with_actor() -> SchedulingStrategy:
    return SchedulingStrategy(type="colocation", target="actor")


@dataclass
class CriticConfig(TrainEngineConfig):
    """Empty backend: inherit actor.backend (SPEC §1)."""

    scheduling_strategy: SchedulingStrategy = field(default_factory=_colocated_with_actor)


@dataclass
class RefConfig(TrainEngineConfig):
    """Empty backend: inherit actor.backend (SPEC §1)."""

    scheduling_strategy: SchedulingStrategy = field(default_factory=_colocated_with_actor)


@dataclass
class ClusterConfig:
    n_nodes: int = 1
    n_gpus_per_node: int = 8


@dataclass
class ModelConfig:
    """Model shape for the checks of SPEC §7; null skips a check."""

    num_layers: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    num_experts: int | None = None
    max_seq_len: int | None = None


@dataclass
class AReaLConfig:
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    actor: TrainEngineConfig = field(default_factory=TrainEngineConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    ref: RefConfig = field(default_factory=RefConfig)
    teacher: TrainEngineConfig = field(default_factory=TrainEngineConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    # Deprecated (SPEC §6): any non-empty value is rejected with its translation.
    allocation_mode: str = ""

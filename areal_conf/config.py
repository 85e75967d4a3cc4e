"""Structured configs for the engines, cluster and model (SPEC §5), and their registration.

This module is Hydra-facing: importing it registers the schema in Hydra's ConfigStore as
``areal_schema`` (use it first in a primary config's defaults list) and the ``areal.``
resolvers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from areal_conf.resolvers import register_resolvers

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
    # Memory of one GPU in GB (10^9 bytes), for the memory check.
    gpu_memory_gb: float = 80.0


@dataclass
class ModelConfig:
    """Model shape for the layout checks and the memory check; null skips a check."""

    num_layers: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    num_experts: int | None = None
    max_seq_len: int | None = None
    # -- memory check (issue 14): null takes the value from hf_config (or actor.path's
    # config.json when it is a local directory); no shape at all: no memory check.
    hidden_size: int | None = None
    ffn_hidden_size: int | None = None
    vocab_size: int | None = None
    head_dim: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_ffn_hidden_size: int | None = None
    moe_router_topk: int | None = None
    tie_word_embeddings: bool | None = None
    hf_config: str | None = None


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


def register_configs() -> None:
    ConfigStore.instance().store(name="areal_schema", node=AReaLConfig)
    register_resolvers()


register_configs()

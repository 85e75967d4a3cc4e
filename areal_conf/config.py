"""Structured configs for the keys areal-conf owns: the ``areal_schema`` config.

``areal_schema`` (use it first in a primary config's defaults list) is served to every
Hydra app by the installed plugin (``hydra_plugins.areal_conf_plugin.areal_configs``),
which builds it with :func:`schema_node` the first time an app loads it; nothing needs to
import this module for that.

The schema overlays real AReaL YAMLs. Its root and ``cluster`` are open: keys that
areal-conf does not own (``experiment_name``, ``cluster.fileroot``, ...) pass through
untouched, while the keys it owns keep their types, so ``cluster.n_nodes=two`` fails at
composition. Engine sections are not in the schema: an engine exists when the YAML or an
override gives its section (``+critic.backend=fsdp:d4``), so a training-only or
inference-only YAML stays what it is; :class:`RolloutConfig`, :class:`TrainEngineConfig`
and :class:`SchedulingStrategy` describe the keys of an engine section that areal-conf
reads (the JSON Schema of ``python -m areal_conf schema`` is built from them), and
``validate`` checks their values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

# Resolved lazily: composition never parses, `--cfg job --resolve` and cfg access do.
ALLOCATION = "${areal.allocation:}"


@dataclass
class SchedulingStrategy:
    """Where an engine runs, as AReaL's SchedulingStrategy."""

    # "separation" (own GPUs, the default) or "colocation" (share `target`'s GPUs).
    type: str = "separation"
    target: str | None = None
    # Colocated: new processes on the target's GPUs (true) or the target's own (false).
    fork: bool = True


@dataclass
class RolloutConfig:
    """The inference engine; an empty backend is an error."""

    backend: str = ""
    scheduling_strategy: SchedulingStrategy = field(default_factory=SchedulingStrategy)
    allocation: Any = ALLOCATION


@dataclass
class TrainEngineConfig:
    """A training engine (actor, critic, ref, teacher)."""

    backend: str = ""
    scheduling_strategy: SchedulingStrategy = field(default_factory=SchedulingStrategy)
    allocation: Any = ALLOCATION


@dataclass
class ClusterConfig:
    n_nodes: int = 1
    # 0 is a CPU run: engines get processes, no GPUs.
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
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    # Deprecated: any non-empty value is rejected with its translation.
    allocation_mode: str = ""


#: Sections of the schema that accept keys areal-conf does not own.
OPEN_SECTIONS = ("cluster",)


def schema_node() -> DictConfig:
    """``AReaLConfig`` as a config whose root and open sections accept unknown keys.

    OmegaConf lets a typed node take unknown keys when its own ``struct`` flag is
    explicitly false; merging a YAML into it keeps the types of the declared keys.
    """
    node: DictConfig = OmegaConf.structured(AReaLConfig)
    node._set_flag("struct", False)
    for name in OPEN_SECTIONS:
        section = node._get_node(name)
        assert section is not None
        section._set_flag("struct", False)
    return node

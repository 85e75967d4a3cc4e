"""Structured configs for the keys areal-conf owns: the ``areal_schema`` config.

``areal_schema`` (use it first in a primary config's defaults list) is served to every
Hydra app by the installed plugin (``hydra_plugins.areal_conf_plugin.areal_configs``),
which builds it with :func:`schema_node` the first time an app loads it; nothing needs to
import this module for that.

The schema overlays real AReaL YAMLs. Its root, ``cluster`` and engine sections are
open: keys that areal-conf does not own (``experiment_name``, ``cluster.fileroot``,
``actor.optimizer``, ...) pass through untouched, while the keys it owns keep their types,
so ``cluster.n_nodes=two`` fails at composition. Each role's section (rollout, actor,
critic, ref, teacher) is an :class:`EngineConfig` with ``backend``,
``scheduling_strategy`` and its computed ``allocation``, whether the YAML or an override
(``critic.backend=fsdp:d4``) gives it. A section the config leaves as the schema gives it
(``backend: null``, nothing else set) is no engine, so a training-only or inference-only
YAML stays what it is. (OmegaConf cannot type a section that is absent: Hydra's dotted
overrides cannot pass through a null typed node.) The teacher's
section follows the AReaL version whose rules apply: AReaL 2.0 types its two layouts
(``teacher.rollout``, ``teacher.train``), AReaL 1.0 the flat section. Another engine
section (any other section with a ``backend``) is typed by listing ``areal_engine`` at
its key in the defaults list (``- areal_engine@judge``).

These dataclasses are also the one description of the config for editors: the JSON
Schema of ``python -m areal_conf schema`` (:mod:`areal_conf.hydra.schema`) is read from them.
A field's docstring is its description there, and the notes in its ``Annotated`` type
(:class:`Keywords`, :class:`Names`) add what an editor can check: bounds, fixed names,
patterns. OmegaConf reads type hints without their ``Annotated`` metadata (2.3 and 2.4
alike), so the notes change nothing in the Hydra schema, and this module imports no
pydantic.
"""

# No `from __future__ import annotations`: the field types stay objects rather than
# strings, which older pydantic (2.5) cannot resolve in another module than its caller's.
import copy
import functools
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from omegaconf import DictConfig, OmegaConf

from areal_conf.areal.roles import ALLOCATION_NODE, ROLE_NAMES, SCHEDULING_TYPES, TEACHER_LAYOUTS

# ------------------------------------------------------------------ schema notes
# Notes for the JSON Schema only. pydantic calls ``__get_pydantic_json_schema__`` on the
# ``Annotated`` metadata of a type while it writes that type's JSON Schema (its protocol;
# nothing here imports pydantic); OmegaConf never sees the notes.


class Keywords:
    """JSON Schema keywords for the annotated type, e.g. ``Keywords(minimum=1)``."""

    __slots__ = ("keywords",)

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __repr__(self) -> str:
        return f"Keywords({self.keywords!r})"

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(core_schema), **self.keywords}


class Names:
    """The value is one of ``names`` (``only``), or they are examples of it."""

    __slots__ = ("names", "only")

    def __init__(self, names: tuple[str, ...], *, only: bool) -> None:
        self.names = names
        self.only = only

    def __repr__(self) -> str:
        return f"Names({self.names!r}, only={self.only})"

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(core_schema), ("enum" if self.only else "examples"): list(self.names)}


AtLeastOne = Keywords(minimum=1)
StringOrNull = Keywords(anyOf=[{"type": "string"}, {"type": "null"}])


# ------------------------------------------------------------------ the dataclasses


@dataclass
class SchedulingStrategy:
    """Where an engine runs: on its own GPUs, or on the GPUs of an engine created before it."""

    # As AReaL's SchedulingStrategy.
    type: Annotated[str, Names(SCHEDULING_TYPES, only=True)] = "separation"
    """separation: own GPUs (the default); colocation: share the GPUs of `target`"""
    target: Annotated[str | None, Names(ROLE_NAMES, only=False)] = None
    """the engine whose GPUs a colocated engine shares; it must be created earlier: a role
    (roles are created in the order of the examples) or another engine section (created
    after the roles, in config order)"""
    fork: bool = True
    """colocated: run in new processes on the target's GPUs (true) or in the target's own
    processes (false); a chain passes only through engines that fork"""


@dataclass
class EngineConfig:
    """An engine section (rollout, actor, critic, ref, teacher, or another engine): the
    keys areal-conf reads; AReaL's other keys of the section pass through."""

    # Left as these defaults, a role's section of the schema is no engine (see
    # areal_conf.config.nodes.is_unset_section).
    schema_section: ClassVar[bool] = True

    # The JSON Schema describes `backend` per role (what an empty one means, which
    # backends), from the role table.
    # Typed Any, not str: OmegaConf would turn `backend: 8.5` or `backend: 8` into the
    # string "8.5"; areal-conf reads the value as written and names what it found. For
    # editors the JSON Schema still says string or null.
    backend: Annotated[Any, StringOrNull] = None  # null: not given (nothing else set: no engine)
    scheduling_strategy: SchedulingStrategy = field(default_factory=SchedulingStrategy)
    allocation: Any = ALLOCATION_NODE  # resolved when read, never at composition
    """Computed: the ${areal.allocation:} resolver expands the engine's backend into
    {spec, backend, dp, tp, pp, cp, ep, etp, edp, world_size}. Do not set it."""


@dataclass
class ClusterConfig:
    """The GPUs available to the run."""

    n_nodes: Annotated[int, AtLeastOne] = 1
    n_gpus_per_node: Annotated[int, Keywords(minimum=0)] = 8
    """0 for a CPU run: engines run as processes without GPUs"""
    gpu_memory_gb: Annotated[float, Keywords(exclusiveMinimum=0)] | None = None
    """memory of one GPU in GB (10^9 bytes); every engine's per-GPU need is checked
    against it when the model shape is known; null: 80 GB is assumed and an engine that
    would not fit is a warning, not an error"""


@dataclass
class ModelConfig:
    """Model shape for the layout checks and the memory check; null skips a check."""

    num_layers: Annotated[int, AtLeastOne] | None = None
    """every pipeline stage needs layers"""
    num_attention_heads: Annotated[int, AtLeastOne] | None = None
    """divisible by tp (fsdp and archon: by tp×cp)"""
    num_kv_heads: Annotated[int, AtLeastOne] | None = None
    """divisible by tp (sglang and vllm: a multiple or a divisor of tp)"""
    num_experts: Annotated[int, AtLeastOne] | None = None
    """divisible by ep; null: no expert layouts (a dense model when the other sizes are
    known)"""
    max_seq_len: Annotated[int, AtLeastOne] | None = None
    """the longest sequence, for the memory check"""
    # -- memory check (issue 14): null takes the value from hf_config (or actor.path's
    # config.json when it is a local directory); no shape at all: no memory check.
    hidden_size: Annotated[int, AtLeastOne] | None = None
    """for the memory check"""
    ffn_hidden_size: Annotated[int, AtLeastOne] | None = None
    """dense MLP size (intermediate_size), for the memory check; megatron, sglang and
    vllm split it over tp"""
    vocab_size: Annotated[int, AtLeastOne] | None = None
    """for the memory check"""
    head_dim: Annotated[int, AtLeastOne] | None = None
    """null: hidden_size / num_attention_heads"""
    moe_ffn_hidden_size: Annotated[int, AtLeastOne] | None = None
    """one expert's MLP size (moe_intermediate_size); megatron splits it over the ffn
    section's t"""
    moe_shared_expert_ffn_hidden_size: Annotated[int, AtLeastOne] | None = None
    """the shared experts' MLP size, if any"""
    moe_router_topk: Annotated[int, AtLeastOne] | None = None
    """experts per token (num_experts_per_tok)"""
    tie_word_embeddings: bool | None = None
    """the output layer shares the embedding matrix"""
    hf_config: str | None = None
    """path of a Hugging Face config.json (or its directory); the keys above that are null
    are read from it"""


@dataclass
class TeacherLayouts:
    """AReaL 2.0's teacher: an inference engine (teacher.rollout) or a training engine
    (teacher.train); absent or null: no teacher."""

    schema_section: ClassVar[bool] = True

    engine_type: Annotated[str, Names(TEACHER_LAYOUTS, only=True)] | None = None
    """which subsection is the teacher engine; null: rollout"""
    rollout: EngineConfig | None = field(default_factory=EngineConfig)
    train: EngineConfig | None = field(default_factory=EngineConfig)


@dataclass
class AReaLConfig:
    """An AReaL config as areal-conf reads it: one backend string per engine. Keys
    areal-conf does not own pass through."""

    # Each role's section; left as the schema gives it, it is no engine (is_unset_section).
    actor: EngineConfig | None = field(default_factory=EngineConfig)
    critic: EngineConfig | None = field(default_factory=EngineConfig)
    ref: EngineConfig | None = field(default_factory=EngineConfig)
    teacher: TeacherLayouts | None = field(default_factory=TeacherLayouts)
    rollout: EngineConfig | None = field(default_factory=EngineConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    # Rejected with its translation when set (validate); `pattern` tells an editor so.
    allocation_mode: Annotated[str, Keywords(pattern="^$", deprecated=True)] = ""
    """Deprecated and rejected when set: give each engine its backend instead (python -m
    areal_conf migrate '<allocation_mode>' prints the overrides)."""


@dataclass
class AReaL1Config(AReaLConfig):
    """The config under AReaL 1.0's rules: the teacher is one flat engine section."""

    teacher: EngineConfig | None = field(default_factory=EngineConfig)  # type: ignore[assignment]


#: The root dataclass for each teacher layout of the version tables.
ROOT_FOR_TEACHER_LAYOUT: dict[str, type[AReaLConfig]] = {
    "nested": AReaLConfig,
    "flat": AReaL1Config,
}
#: Sections of the schema that accept keys areal-conf does not own, besides the engine
#: sections (every section of OPEN_TYPES).
OPEN_SECTIONS = ("cluster",)
#: The section types that take AReaL's keys beside their own.
OPEN_TYPES: tuple[type, ...] = (EngineConfig, TeacherLayouts)


def schema_node() -> DictConfig:
    """The root dataclass for the AReaL version whose rules apply, as a config whose
    root, open sections and engine sections accept unknown keys (built once per teacher
    layout).

    OmegaConf lets a typed node take unknown keys when its own ``struct`` flag is
    explicitly false; merging a YAML into it keeps the types of the declared keys.
    """
    from areal_conf.areal.versions import teacher_layout

    # A bad AREAL_CONF_AREAL_VERSION gives the newest version's shape: validation reports
    # it, with its fix, once the config is composed.
    return copy.deepcopy(_schema_for(teacher_layout()))


@functools.cache
def _schema_for(teacher_layout: str) -> DictConfig:
    node: DictConfig = OmegaConf.structured(ROOT_FOR_TEACHER_LAYOUT[teacher_layout])
    node._set_flag("struct", False)
    for name in OPEN_SECTIONS:
        section = node._get_node(name)
        assert section is not None
        section._set_flag("struct", False)
    _open_engine_sections(node)
    return node


def _open_engine_sections(node: DictConfig) -> None:
    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig) and OmegaConf.get_type(child) in OPEN_TYPES:
            child._set_flag("struct", False)
            _open_engine_sections(child)


def engine_node() -> DictConfig:
    """``areal_engine``: an :class:`EngineConfig` section that takes AReaL's other keys,
    for an engine that is not a role (``- areal_engine@judge`` in a defaults list)."""
    return copy.deepcopy(_engine_section())


@functools.cache
def _engine_section() -> DictConfig:
    node: DictConfig = OmegaConf.structured(EngineConfig)
    node._set_flag("struct", False)
    return node

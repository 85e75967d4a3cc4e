"""A JSON Schema of the config for YAML editors (``python -m areal_conf schema``).

The pydantic models below mirror the structured config dataclasses of
:mod:`areal_conf.config` field by field (a test keeps them in step); they exist only to
print the schema, validation of a real config is :func:`areal_conf.validate.validate`.

Every ``backend`` field carries a ``pattern`` built from the one backend table
(:data:`areal_conf.backends.BACKENDS`) that accepts the backend-string grammar *as syntax*:
the backend names of the engine's kind, the dimension letters each backend takes
(another letter only with size 1), the flat form and, for megatron and archon, the
hybrid form with or without its parentheses, blanks between tokens. So an editor flags
``d4t2`` (no backend prefix), ``fsdp:d4p2``, ``FSDP:d8`` or ``sglang:d4`` on the actor.
It is a superset of what the parser accepts: a repeated letter, a world size that does
not fit, or a hybrid rule about sizes is left to the parser. Strings holding an
OmegaConf interpolation (``${...}``) are accepted everywhere, as their value is unknown
until resolution.

The schema overlays real AReaL configs as ``areal_schema`` does: the root, the engine
sections and ``cluster`` accept keys areal-conf does not own (``experiment_name``,
``actor.optimizer``, ``cluster.fileroot``, any other engine section such as
``judge_engine``), the keys it owns keep their types, and every engine section is
optional (absent or null: no engine). ``model`` is areal-conf's own and stays closed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from areal_conf import config as _dataclasses
from areal_conf.backends import BACKENDS, MAX_SIZE
from areal_conf.roles import ROLE, SCHEDULING_TYPES

SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

# -------------------------------------------------------------------------- patterns

_BLANK = "[ \\t]*"
# 1..9999999: at most the digits of 2**20 (the value itself is the parser's business).
_SIZE = f"[1-9][0-9]{{0,{len(str(MAX_SIZE)) - 1}}}"
# Any string with an OmegaConf interpolation in it.
INTERPOLATION: Final = ".*\\$\\{.*\\}.*"


def _dims(allowed: str, letters: str) -> str:
    """One dims list: letters of ``allowed`` with any size, the other ``letters`` size 1."""
    any_size = "".join(ch for ch in letters if ch in allowed)
    size_one = "".join(ch for ch in letters if ch not in allowed)
    parts = []
    if any_size:
        parts.append(f"[{any_size}]{_BLANK}{_SIZE}")
    if size_one:
        parts.append(f"[{size_one}]{_BLANK}1")
    dim = "(?:" + "|".join(parts) + ")"
    return f"{dim}(?:{_BLANK}{dim})*"


def _spec(name: str) -> str:
    """The syntax of one backend's strings, without anchors."""
    rule = BACKENDS[name]
    body = _dims(rule.dims, "dtpce")
    if rule.hybrid:
        attn = _dims(rule.dims, "dtpc")
        ffn = _dims(rule.dims, "dtpe")
        sections = f"attn{_BLANK}:{_BLANK}{attn}{_BLANK}\\|{_BLANK}ffn{_BLANK}:{_BLANK}{ffn}"
        body = f"(?:{body}|\\({_BLANK}{sections}{_BLANK}\\)|{sections})"
    return f"{name}{_BLANK}:{_BLANK}{body}"


def backend_pattern(kind: str, *, allow_empty: bool = False, interpolation: bool = True) -> str:
    """An ECMA-262 / Python regex (anchored) for the backend strings of ``kind``.

    ``kind`` is ``"inference"`` or ``"training"``; ``allow_empty`` admits ``""``
    (critic, ref, teacher); ``interpolation`` admits any string with ``${...}``.
    """
    names = [name for name, rule in BACKENDS.items() if rule.kind == kind]
    if not names:
        raise ValueError(f"no backend of kind {kind!r}")
    alternatives = [_BLANK + "(?:" + "|".join(_spec(n) for n in names) + ")" + _BLANK]
    if allow_empty:
        alternatives.insert(0, "")
    if interpolation:
        alternatives.append(INTERPOLATION)
    return "^(?:" + "|".join(alternatives) + ")$"


# ---------------------------------------------------------------------------- models

_Interpolated = Annotated[
    str,
    Field(pattern=f"^{INTERPOLATION}$", description="an OmegaConf interpolation, e.g. ${oc.env:N}"),
]
_Count = Annotated[int, Field(ge=1)]
_OptionalCount = _Count | None | _Interpolated

_GRAMMAR = (
    "backend:dims, e.g. {example}; dims are letters d (data) t (tensor) p (pipeline) "
    "c (context) e (expert) with sizes"
)
_ALLOCATION_DOC = (
    "Computed: the ${areal.allocation:} resolver expands the engine's backend into "
    "{spec, backend, dp, tp, pp, cp, ep, etp, edp, world_size}. Do not set it."
)


def _backend_field(kind: str, default: str, description: str, *, allow_empty: bool) -> Any:
    return Field(
        default=default,
        description=description,
        pattern=backend_pattern(kind, allow_empty=allow_empty),
        examples=["sglang:d2t4"] if kind == "inference" else ["fsdp:d4t2", "megatron:d2p2t4e4"],
    )


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """A section that also holds keys areal-conf does not read (AReaL's own)."""

    model_config = ConfigDict(extra="allow")


class SchedulingStrategy(_Open):
    """Where an engine runs: on its own GPUs, or on the GPUs of an engine created before it."""

    type: Literal[SCHEDULING_TYPES] | _Interpolated = Field(  # type: ignore[valid-type]
        default=_dataclasses.SchedulingStrategy.type,
        description="separation: own GPUs (the default); colocation: share the GPUs of `target`",
    )
    target: str | None = Field(
        default=_dataclasses.SchedulingStrategy.target,
        description="the engine whose GPUs a colocated engine shares; it must be created "
        f"earlier ({', '.join(ROLE)}, then other engines in config order)",
    )
    fork: bool | _Interpolated = Field(
        default=_dataclasses.SchedulingStrategy.fork,
        description="colocated: run in new processes on the target's GPUs (true) or in the "
        "target's own processes (false); a chain passes only through engines that fork",
    )


_EMPTY_MEANS = {
    "error": "Required",
    "inherit": '"" to use actor.backend',
    "disable": '"" for no engine',
}


def _engine_model(name: str) -> type[BaseModel]:
    """The section model of one role, from the role table."""
    from pydantic import create_model

    role = ROLE[name]
    names = ", ".join(n for n, r in BACKENDS.items() if r.kind == role.kind)
    source = (
        _dataclasses.RolloutConfig if role.kind == "inference" else _dataclasses.TrainEngineConfig
    )
    empty = _EMPTY_MEANS[role.empty_backend]
    description = f"{empty}. {names}: " + _GRAMMAR.format(example=role.example)
    return create_model(
        f"{name.capitalize()}Config",
        __base__=_Open,
        __doc__=f"The {name} engine ({role.kind}); absent or null: no {name} engine.",
        backend=(
            str,
            _backend_field(
                role.kind,
                source.backend,
                description,
                allow_empty=role.empty_backend != "error",
            ),
        ),
        scheduling_strategy=(
            SchedulingStrategy,
            Field(default_factory=SchedulingStrategy),
        ),
        allocation=(Any, Field(default=None, description=_ALLOCATION_DOC)),
    )


ENGINE_MODELS: Final[dict[str, type[BaseModel]]] = {name: _engine_model(name) for name in ROLE}


class ClusterConfig(_Open):
    """The GPUs available to the run."""

    n_nodes: _Count | _Interpolated = Field(default=_dataclasses.ClusterConfig.n_nodes)
    n_gpus_per_node: Annotated[int, Field(ge=0)] | _Interpolated = Field(
        default=_dataclasses.ClusterConfig.n_gpus_per_node,
        description="0 for a CPU run: engines run as processes without GPUs",
    )
    gpu_memory_gb: Annotated[float, Field(gt=0)] | _Interpolated = Field(
        default=_dataclasses.ClusterConfig.gpu_memory_gb,
        description="memory of one GPU in GB (10^9 bytes); every engine's per-GPU need "
        "is checked against it when the model shape is known",
    )


class ModelConfig(_Closed):
    """Model shape for the layout checks and the memory check; null skips a check."""

    num_layers: _OptionalCount = Field(default=None, description="divisible by pp")
    num_attention_heads: _OptionalCount = Field(default=None, description="divisible by tp")
    num_kv_heads: _OptionalCount = Field(default=None, description="a multiple or a divisor of tp")
    num_experts: _OptionalCount = Field(
        default=None, description="divisible by ep; null: a dense model (no expert layouts)"
    )
    max_seq_len: _OptionalCount = Field(default=None, description="divisible by 2×cp when cp > 1")
    hidden_size: _OptionalCount = Field(default=None, description="for the memory check")
    ffn_hidden_size: _OptionalCount = Field(
        default=None, description="dense MLP size (intermediate_size), for the memory check"
    )
    vocab_size: _OptionalCount = Field(default=None, description="for the memory check")
    head_dim: _OptionalCount = Field(
        default=None, description="null: hidden_size / num_attention_heads"
    )
    moe_ffn_hidden_size: _OptionalCount = Field(
        default=None, description="one expert's MLP size (moe_intermediate_size)"
    )
    moe_shared_expert_ffn_hidden_size: _OptionalCount = Field(
        default=None, description="the shared experts' MLP size, if any"
    )
    moe_router_topk: _OptionalCount = Field(
        default=None, description="experts per token (num_experts_per_tok)"
    )
    tie_word_embeddings: bool | _Interpolated | None = Field(
        default=None, description="the output layer shares the embedding matrix"
    )
    hf_config: str | None = Field(
        default=None,
        description="path of a Hugging Face config.json (or its directory); the keys "
        "above that are null are read from it",
    )


def _root_model() -> type[BaseModel]:
    from pydantic import create_model

    engines: dict[str, Any] = {
        name: (model | None, Field(default=None)) for name, model in ENGINE_MODELS.items()
    }
    return create_model(
        "AReaLConfig",
        __config__=ConfigDict(extra="allow", title="AReaL config (areal-conf)"),
        __doc__="An AReaL config as areal-conf reads it: one backend string per engine. "
        "Keys areal-conf does not own pass through.",
        **engines,
        cluster=(ClusterConfig, Field(default_factory=ClusterConfig)),
        model=(ModelConfig, Field(default_factory=ModelConfig)),
        allocation_mode=(
            str,
            Field(
                default=_dataclasses.AReaLConfig.allocation_mode,
                pattern="^$",
                deprecated=True,
                description="Deprecated and rejected when set: give each engine its backend "
                "instead (python -m areal_conf migrate '<allocation_mode>' prints the "
                "overrides).",
            ),
        ),
        defaults=(
            list[Any] | None,
            Field(default=None, description="Hydra's defaults list (not part of the config)"),
        ),
        hydra=(
            dict[str, Any] | None,
            Field(default=None, description="Hydra's own settings (not part of the config)"),
        ),
    )


AReaLConfig: Final = _root_model()


# Keys of the root that are Hydra's, not the config's.
HYDRA_KEYS: Final = ("defaults", "hydra")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config file."""
    schema = AReaLConfig.model_json_schema()
    return {"$schema": SCHEMA_DIALECT, **schema}


def schema_json(indent: int = 2) -> str:
    return json.dumps(json_schema(), indent=indent, ensure_ascii=False)

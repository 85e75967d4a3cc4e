"""A JSON Schema of the config for YAML editors (``python -m areal_conf schema``).

It is read from the structured config dataclasses of :mod:`areal_conf.hydra.structured` by
pydantic's ``TypeAdapter``: their fields, types and defaults, their docstrings as
descriptions, the notes of their ``Annotated`` types as bounds and fixed names. Nothing
here restates a field. This module is imported only to print the schema; validation of a
real config is :func:`areal_conf.validation.validate`.

The engine sections are described from the engine table of the AReaL version whose rules
apply (:data:`areal_conf.areal.versions.VERSIONS`): one section per engine, with the keys
of the engine dataclass; AReaL 2.0's teacher holds its two layouts. Every ``backend``
field carries a ``pattern`` built from the one backend table
(:data:`areal_conf.spec.backends.BACKENDS`) that accepts the backend-string grammar *as syntax*:
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
optional (absent or null: no engine). A section that ``areal_schema`` keeps closed
(``model``) is closed here too.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import itertools
import json
import textwrap
import typing
from functools import cache
from typing import Any, Final

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from areal_conf.areal.roles import ROLE_NAMES, example_backend
from areal_conf.areal.versions import AReaLVersion, EngineRow, choose_rules
from areal_conf.hydra import structured as config
from areal_conf.spec.backends import ATTN_DIMS, BACKENDS, DIM_LETTERS, FFN_DIMS, MAX_SIZE

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
    body = _dims(rule.dims, DIM_LETTERS)
    if rule.hybrid:
        attn = _dims(rule.dims, ATTN_DIMS)
        ffn = _dims(rule.dims, FFN_DIMS)
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


# ------------------------------------------------------------ from the dataclasses

# A value OmegaConf types (a number, a boolean) or one of fixed names may also be written
# as an interpolation, resolved later: the schema accepts it beside the typed value.
INTERPOLATED: Final[dict[str, Any]] = {
    "description": "an OmegaConf interpolation, e.g. ${oc.env:N}",
    "pattern": f"^{INTERPOLATION}$",
    "type": "string",
}
_TYPED = ("integer", "number", "boolean")


def _one_line(text: str) -> str:
    return " ".join(inspect.cleandoc(text).split())


@cache
def field_docstrings(cls: type) -> dict[str, str]:
    """The docstrings written under the fields of ``cls`` (a string after ``name: type``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = _one_line(following.value.value)
    return docs


def _class_docstring(cls: type) -> str | None:
    # A dataclass without a docstring gets its signature as __doc__: that is no description.
    doc = cls.__doc__
    if doc is None or doc.startswith(f"{cls.__name__}("):
        return None
    return _one_line(doc)


@cache
def _closed_sections() -> frozenset[type]:
    """The dataclasses that ``areal_schema`` keeps closed: sections not in OPEN_SECTIONS."""
    hints = typing.get_type_hints(config.AReaLConfig)
    return frozenset(
        hints[f.name]
        for f in dataclasses.fields(config.AReaLConfig)
        if dataclasses.is_dataclass(hints[f.name]) and f.name not in config.OPEN_SECTIONS
    )


class ConfigJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema of the config dataclasses, with the rules of a config file:
    descriptions from docstrings, interpolations beside typed values, open sections."""

    def generate_inner(self, schema: Any) -> JsonSchemaValue:  # a core schema or a field's
        json_schema = super().generate_inner(schema)
        if json_schema.get("type") in _TYPED or "enum" in json_schema:
            return {"anyOf": [json_schema, INTERPOLATED]}
        return json_schema

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        json_schema = super().dataclass_schema(schema)
        cls: type = schema["cls"]
        description = _class_docstring(cls)
        if description is not None:
            json_schema["description"] = description
        json_schema["additionalProperties"] = cls not in _closed_sections()
        for name, doc in field_docstrings(cls).items():
            json_schema["properties"][name]["description"] = doc
        return json_schema


# -------------------------------------------------------------- from the role table

_GRAMMAR = (
    "backend:dims, e.g. {example}; dims are letters d (data) t (tensor) p (pipeline) "
    "c (context) e (expert) with sizes"
)
_EMPTY_MEANS = {
    "error": "Required",
    "inherit": '"" to use actor.backend',
    "disable": '"" for no engine',
}
_EXAMPLES = {"inference": ["sglang:d2t4"], "training": ["fsdp:d4t2", "megatron:d2p2t4e4"]}
#: The dataclass of an engine section (of every role; the schema adds each role's rules).
ENGINE_SECTION: Final[type] = config.EngineConfig


def section_title(section: str) -> str:
    """``ActorConfig``, ``TeacherRolloutConfig``: the definition of an engine section."""
    return "".join(part.capitalize() for part in section.split(".")) + "Config"


def _row_section(row: EngineRow, section: JsonSchemaValue) -> JsonSchemaValue:
    """The engine section, with the backend rules of the version's engine ``row``."""
    names = ", ".join(n for n, r in BACKENDS.items() if r.kind == row.kind)
    out = copy.deepcopy(section)
    out["title"] = section_title(row.section)
    selected = (
        f", when teacher.engine_type is {row.engine_type}" if row.engine_type is not None else ""
    )
    out["description"] = (
        f"The {row.name} engine ({row.kind}){selected}; absent or null: no {row.name} engine."
    )
    backend = out["properties"]["backend"] | {
        "description": f"{_EMPTY_MEANS[row.empty_backend]}; null: not given. {names}: "
        + _GRAMMAR.format(example=example_backend(row.name, row.kind)),
        "pattern": backend_pattern(row.kind, allow_empty=row.empty_backend != "error"),
        "examples": _EXAMPLES[row.kind],
    }
    out["properties"]["backend"] = dict(sorted(backend.items()))  # keys sorted, as pydantic's
    return out


def _optional(title: str) -> JsonSchemaValue:
    return {"anyOf": [{"$ref": f"#/$defs/{title}"}, {"type": "null"}], "default": None}


# ------------------------------------------------------------------ the document

#: Keys of the root that are Hydra's, not the config's.
HYDRA_PROPERTIES: Final[dict[str, JsonSchemaValue]] = {
    "defaults": {
        "anyOf": [{"items": {}, "type": "array"}, {"type": "null"}],
        "default": None,
        "description": "Hydra's defaults list (not part of the config)",
        "title": "Defaults",
    },
    "hydra": {
        "anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "null"}],
        "default": None,
        "description": "Hydra's own settings (not part of the config)",
        "title": "Hydra",
    },
}
HYDRA_KEYS: Final = tuple(HYDRA_PROPERTIES)
TITLE: Final = "AReaL config (areal-conf)"


def json_schema(rules: AReaLVersion | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config file, with the engine sections of AReaL
    ``rules`` (default: the version whose rules apply, as for validation)."""
    if rules is None:
        rules = choose_rules().rules
    root_class = config.ROOT_FOR_TEACHER_LAYOUT[rules.teacher_layout]
    adapters = [("root", root_class), ("engine", ENGINE_SECTION)]
    found, shared = TypeAdapter.json_schemas(
        [(key, "validation", TypeAdapter(cls)) for key, cls in adapters],
        schema_generator=ConfigJsonSchema,
    )
    defs: dict[str, JsonSchemaValue] = shared["$defs"]

    def take(key: str) -> JsonSchemaValue:
        ref: str = found[(key, "validation")]["$ref"]
        return defs.pop(ref.rsplit("/", 1)[-1])

    root = take("root")
    section = take("engine")
    # Each engine row of the version gets the engine section with its backend rules; a
    # row under a section (teacher.rollout) goes into that section's definition.
    engines: dict[str, JsonSchemaValue] = {}
    for row in rules.engines:
        title = section_title(row.section)
        defs[title] = _row_section(row, section)
        top, _, sub = row.section.partition(".")
        if not sub:
            engines[top] = _optional(title)
            continue
        holder = section_title(top)
        if holder not in defs:
            layouts = defs.pop(config.TeacherLayouts.__name__)
            defs[holder] = layouts | {"title": holder}
            engines[top] = _optional(holder)
        defs[holder]["properties"][sub] = _optional(title)
    root["title"] = TITLE
    others = {k: v for k, v in root["properties"].items() if k not in engines}
    ordered = {name: engines[name] for name in ROLE_NAMES if name in engines}
    root["properties"] = {**ordered, **others, **HYDRA_PROPERTIES}
    return {"$schema": SCHEMA_DIALECT, "$defs": dict(sorted(defs.items())), **root}


def schema_json(indent: int = 2, *, rules: AReaLVersion | None = None) -> str:
    return json.dumps(json_schema(rules), indent=indent, ensure_ascii=False)

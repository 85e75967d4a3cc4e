"""The JSON Schema for YAML editors (issue 6): ``python -m areal_conf schema``."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from _helpers import ROOT, run_python
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from areal_conf.areal.roles import ROLE_NAMES, SCHEDULING_TYPES
from areal_conf.areal.versions import VERSIONS
from areal_conf.cli import main
from areal_conf.errors import AllocationError
from areal_conf.hydra import structured as dataclass_configs
from areal_conf.hydra.schema import (
    ENGINE_SECTION,
    HYDRA_KEYS,
    backend_pattern,
    field_docstrings,
    json_schema,
    section_title,
)
from areal_conf.spec.layouts import layouts
from areal_conf.spec.parser import parse_backend

SCHEMA = json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
INFERENCE = re.compile(backend_pattern("inference"))
TRAINING = re.compile(backend_pattern("training"))
OPTIONAL_TRAINING = re.compile(backend_pattern("training", allow_empty=True))


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    data.pop("defaults", None)
    return data


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _leaves(error: jsonschema.ValidationError) -> Iterator[jsonschema.ValidationError]:
    """The errors inside an anyOf (e.g. an engine section or null), without the null branch."""
    branches = [
        sub
        for sub in error.context or ()
        if not (sub.validator == "type" and sub.validator_value == "null")
    ]
    if not branches:
        yield error
    for sub in branches:
        yield from _leaves(sub)


def errors(instance: Any) -> list[str]:
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for top in VALIDATOR.iter_errors(instance)
        for e in _leaves(top)
    ]


BASE = load(ROOT / "conf" / "config.yaml")


def with_backend(engine: str, backend: Any) -> dict[str, Any]:
    """BASE with ``<engine>.backend`` set; ``engine`` may be dotted (``teacher.rollout``)."""
    change: dict[str, Any] = {"backend": backend}
    for part in reversed(engine.split(".")):
        change = {part: change}
    return merge(BASE, change)


# ------------------------------------------------------------------- the files


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_cli_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == SCHEMA
    # AReaL 1.0's teacher is one flat engine section; 2.0's holds its two layouts.
    assert main(["schema", "--areal-version", "1.0"]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert flat == SCHEMAS["1.0"][0]
    assert "backend" in flat["$defs"]["TeacherConfig"]["properties"]
    assert set(SCHEMA["$defs"]["TeacherConfig"]["properties"]) == {
        "engine_type",
        "rollout",
        "train",
    }


def test_config_yaml_is_valid() -> None:
    assert errors(BASE) == []
    # Hydra's own keys of a primary config are allowed, so an editor keeps quiet on them.
    assert errors(yaml.safe_load((ROOT / "conf" / "config.yaml").read_text())) == []


@pytest.mark.parametrize(
    "path", sorted((ROOT / "conf" / "experiment").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_experiment_merged_onto_config_yaml_is_valid(path: Path) -> None:
    merged = merge(BASE, load(path))
    assert errors(merged) == []
    assert errors(load(path)) == []  # alone, as an editor sees the file


def test_the_resolved_allocation_nodes_are_accepted() -> None:
    resolved = merge(BASE, {"actor": {"allocation": {"spec": "fsdp:d4t2", "world_size": 8}}})
    assert errors(resolved) == []


# ------------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    "engine, backend",
    [
        ("actor", "d4t2"),  # bare dims: no backend prefix
        ("rollout", "d4t2"),
        ("critic", "d4t2"),
        ("teacher.train", "(attn:d4|ffn:t2)"),
        ("teacher.train", "sglang:d4"),  # the training teacher
        ("teacher.rollout", "fsdp:d8"),  # the inference teacher
        ("actor", "FSDP:d8"),
        ("actor", "fdsp:d8"),
        ("actor", "sglang.d4"),
        ("actor", "fsdp:d4p2"),  # fsdp has no pipeline
        ("actor", "fsdp:(attn:d4|ffn:t2)"),  # no hybrid on fsdp
        ("actor", "sglang:d8"),  # inference backend on a training engine
        ("rollout", "fsdp:d8"),
        ("actor", ""),  # required
        ("rollout", ""),
        ("actor", "fsdp:"),
        ("actor", "fsdp:d0"),
        ("actor", "fsdp:d04"),
        ("actor", "fsdp:d٤"),
        ("actor", "sglang:d4t2+fsdp:d8"),
        ("actor", "fsdp[actor]:d4"),
        ("actor", "megatron:(attn:d4e2|ffn:t2)"),  # e in attn
        ("actor", "megatron:(attn:d4|ffn:c2)"),  # c in ffn
        ("actor", "megatron:(attn:d4|ffn:t2"),
        ("actor", 8),
    ],
)
def test_bad_backends_are_flagged(engine: str, backend: Any) -> None:
    found = errors(with_backend(engine, backend))
    assert found and all(e.startswith(f"{engine}.backend:") for e in found), found
    assert not accepted_by_parser(engine, backend)  # the parser (or validate) agrees


def accepted_by_parser(engine: str, backend: Any) -> bool:
    try:
        alloc = parse_backend(backend)
    except AllocationError:
        return False
    return alloc.is_inference == (engine in ("rollout", "teacher.rollout"))


@pytest.mark.parametrize(
    "change, where",
    [
        ({"cluster": {"n_nodes": 0}}, "cluster.n_nodes"),
        ({"cluster": {"n_gpus_per_node": "8"}}, "cluster.n_gpus_per_node"),
        ({"model": {"num_experts": 0}}, "model.num_experts"),
        ({"model": {"num_head": 8}}, "model"),
        ({"allocation_mode": "sglang:d4t2+fsdp:d8"}, "allocation_mode"),
        (
            {"critic": {"scheduling_strategy": {"type": "colocated"}}},
            "critic.scheduling_strategy.type",
        ),
        (
            {"critic": {"scheduling_strategy": {"fork": "maybe"}}},
            "critic.scheduling_strategy.fork",
        ),
        ({"cluster": {"n_gpus_per_node": -1}}, "cluster.n_gpus_per_node"),
    ],
)
def test_other_mistakes_are_flagged(change: dict[str, Any], where: str) -> None:
    found = errors(merge(BASE, change))
    assert found and all(e.startswith(f"{where}:") for e in found), found


@pytest.mark.parametrize(
    "change",
    [
        {"critic": {"backend": ""}},
        {"teacher": {"rollout": {"backend": ""}}},
        {"teacher": {"engine_type": "train", "train": {"backend": "megatron:d2p2t4"}}},
        {"teacher": {"rollout": {"backend": "sglang:d1t4", "path": "Qwen/Qwen3-8B"}}},
        {"actor": {"backend": " megatron : ( attn : d4 p2 t2 c2 | ffn : d2 p2 t4 e2 ) "}},
        {"actor": {"backend": "megatron:attn:d4p2t2c2|ffn:d2p2t4e2"}},
        {"actor": {"backend": "fsdp:d4p1t1"}},  # unsupported dimension with size 1
        {"actor": {"backend": "${oc.env:ACTOR_BACKEND}"}},
        {"rollout": {"backend": "sglang:d${oc.env:N}"}},
        {"cluster": {"n_nodes": "${oc.env:NNODES}"}},
        {"model": {"num_layers": None, "num_experts": 64}},
        {"allocation_mode": ""},
        # Keys areal-conf does not own pass through, as in real AReaL configs.
        {"experiment_name": "gsm8k", "actor": {"path": "Qwen/Qwen3-1.7B", "kl_ctl": 0.0}},
        {"cluster": {"fileroot": "/tmp", "n_gpus_per_node": 0}},
        {"judge_engine": {"backend": "sglang:d1", "max_concurrent_rollouts": 32}},
        {"critic": None, "ref": None},
        {"critic": {"scheduling_strategy": {"target": "judge_engine", "fork": False}}},
    ],
)
def test_valid_values_pass(change: dict[str, Any]) -> None:
    assert errors(merge(BASE, change)) == []


# ------------------------------------------------------- pattern vs parser


def canonical_layouts() -> list[str]:
    moe = {"num_experts": 16}
    found = (
        layouts("fsdp", 24)
        + layouts("megatron", 16, model=moe)
        + layouts("archon", 16, model=moe)
        + layouts("megatron", 12, model={"num_experts": 6})
        + layouts("sglang", 16)
        + layouts("vllm", 12)
    )
    return found


def test_pattern_accepts_every_canonical_layout_of_its_kind() -> None:
    specs = canonical_layouts()
    assert len(specs) > 300
    assert sum("(attn:" in s for s in specs) > 100
    for spec in specs:
        alloc = parse_backend(spec)
        assert str(alloc) == spec
        right, wrong = (INFERENCE, TRAINING) if alloc.is_inference else (TRAINING, INFERENCE)
        assert right.search(spec), spec
        assert OPTIONAL_TRAINING.search(spec) or alloc.is_inference
        assert not wrong.search(spec), spec
        bare = spec.split(":", 1)[1]
        assert not right.search(bare) and not OPTIONAL_TRAINING.search(bare), bare


def test_pattern_is_syntax_only() -> None:
    # Semantic errors pass the pattern; the parser rejects them.
    for spec in [
        "fsdp:d2d4",
        "megatron:(attn:d4p2|ffn:d4p4)",
        "megatron:(attn:d4|ffn:d3t2)",
        "archon:d4t2e3",
        "fsdp:d2000000",
    ]:
        assert TRAINING.search(spec), spec
        with pytest.raises(AllocationError):
            parse_backend(spec)


_BLANKS = st.sampled_from(["", "", "", " ", "\t"])
_LETTERS = st.sampled_from("ddddttttppcce" + "x")
_SIZES = st.sampled_from(["1", "1", "2", "2", "4", "4", "8", "16", "3", "0", "01", ""])


@st.composite
def _dims_text(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(_LETTERS, _BLANKS, _SIZES, _BLANKS), min_size=1, max_size=3))
    return "".join(letter + b1 + size + b2 for letter, b1, size, b2 in parts)


@st.composite
def _near_grammar(draw: st.DrawFn) -> str:
    """Texts close to the grammar of SPEC §2: many parse, many do not."""
    name = draw(st.sampled_from(["fsdp", "megatron", "archon", "sglang", "vllm", "Fsdp", ""]))
    sep = draw(st.sampled_from([":", ":", ":", ".", ""]))
    b = [draw(_BLANKS) for _ in range(4)]
    if draw(st.booleans()):
        body = draw(_dims_text())
    else:
        attn, ffn = draw(_dims_text()), draw(_dims_text())
        inner = f"attn{b[0]}:{attn}{b[1]}|{b[2]}ffn:{ffn}"
        body = draw(st.sampled_from([f"({inner})", inner, f"({inner}", f"{inner})"]))
    return f"{b[3]}{name}{b[0]}{sep}{b[1]}{body}{b[2]}"


@settings(max_examples=3000, deadline=None)
@given(_near_grammar())
def test_anything_the_parser_accepts_matches_the_pattern(text: str) -> None:
    try:
        alloc = parse_backend(text)
    except AllocationError:
        return
    pattern = INFERENCE if alloc.is_inference else TRAINING
    assert pattern.search(text), repr(text)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(canonical_layouts()), st.data())
def test_blanks_between_tokens_keep_the_match(spec: str, data: st.DataObject) -> None:
    # Blanks may go anywhere between tokens: split before every letter, ':', '(', '|', ')'.
    pieces = re.findall(r"[a-z]+(?=:)|attn|ffn|[dtpce][0-9]+|[():|]", spec)
    assert "".join(pieces) == spec
    blanks = data.draw(
        st.lists(
            st.sampled_from(["", " ", "\t", "  "]),
            min_size=len(pieces) + 1,
            max_size=len(pieces) + 1,
        )
    )
    text = blanks[0] + "".join(p + b for p, b in zip(pieces, blanks[1:], strict=True))
    assert str(parse_backend(text)) == spec
    pattern = INFERENCE if parse_backend(text).is_inference else TRAINING
    assert pattern.search(text), repr(text)


# ------------------------------------------------------- read from the dataclasses


def _dataclasses_under(cls: type) -> list[type]:
    """``cls`` and the dataclasses of its fields (optional or not), recursively, each once."""
    found = [cls]
    for hint in typing.get_type_hints(cls).values():
        for inner in (hint, *typing.get_args(hint)):
            if dataclasses.is_dataclass(inner) and isinstance(inner, type):
                found += [c for c in _dataclasses_under(inner) if c not in found]
    return found


#: The schema of each version's rules, and its root dataclass.
SCHEMAS = {
    version: (json_schema(rules), dataclass_configs.ROOT_FOR_TEACHER_LAYOUT[rules.teacher_layout])
    for version, rules in VERSIONS.items()
}


def _schemas_of(cls: type) -> list[dict[str, Any]]:
    """Where the schemas of the versions describe the dataclass ``cls``: its definitions
    (one per engine of a version for an engine section, the root document for a root)."""
    found: list[dict[str, Any]] = []
    for version, (schema, root) in SCHEMAS.items():
        if cls not in _dataclasses_under(root) and cls is not ENGINE_SECTION:
            continue
        if cls is root:
            found.append(schema)
        elif cls is ENGINE_SECTION:
            found += [
                schema["$defs"][section_title(row.section)] for row in VERSIONS[version].engines
            ]
        elif cls is dataclass_configs.TeacherLayouts:
            found.append(schema["$defs"]["TeacherConfig"])
        elif not issubclass(cls, dataclass_configs.AReaLConfig):
            found.append(schema["$defs"][cls.__name__])
    assert found, cls
    return found


DESCRIBED = list(
    dict.fromkeys(
        cls
        for top in (*dataclass_configs.ROOT_FOR_TEACHER_LAYOUT.values(), ENGINE_SECTION)
        for cls in _dataclasses_under(top)
    )
)


def test_the_walk_over_the_dataclasses_finds_all_of_them() -> None:
    # Every dataclass of config.py is reached from the root or an engine section.
    in_module = [
        value
        for value in vars(dataclass_configs).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == dataclass_configs.__name__
    ]
    assert sorted(c.__name__ for c in DESCRIBED) == sorted(c.__name__ for c in in_module)
    assert in_module


@pytest.mark.parametrize("cls", DESCRIBED, ids=lambda c: c.__name__)
def test_every_dataclass_field_is_in_the_schema(cls: type) -> None:
    fields = [f.name for f in dataclasses.fields(cls)]
    for schema in _schemas_of(cls):
        properties = list(schema["properties"])
        # A root adds Hydra's keys after its own fields.
        if issubclass(cls, dataclass_configs.AReaLConfig):
            assert properties[: len(ROLE_NAMES)] == list(ROLE_NAMES)
            assert properties[len(fields) :] == list(HYDRA_KEYS)
            properties = properties[: len(fields)]
        assert properties == fields


@pytest.mark.parametrize("cls", DESCRIBED, ids=lambda c: c.__name__)
def test_defaults_and_descriptions_are_the_dataclass_ones(cls: type) -> None:
    docs = field_docstrings(cls)
    for schema in _schemas_of(cls):
        for f in dataclasses.fields(cls):
            described = schema["properties"][f.name]
            if f.default is not dataclasses.MISSING:
                assert described["default"] == f.default, f.name
            if f.name in docs:
                assert described["description"] == docs[f.name], f.name


def test_field_docstrings_are_read() -> None:
    docs = field_docstrings(dataclass_configs.ClusterConfig)
    assert docs["n_gpus_per_node"] == "0 for a CPU run: engines run as processes without GPUs"
    # A docstring over several lines is one line in the schema.
    assert docs["gpu_memory_gb"].startswith("memory of one GPU in GB (10^9 bytes); every")
    assert "\n" not in docs["gpu_memory_gb"] and "  " not in docs["gpu_memory_gb"]
    assert "n_nodes" not in docs


def test_descriptions_are_for_users() -> None:
    # Users have no internal spec: the schema never points at one.
    text = json.dumps(SCHEMA, ensure_ascii=False)
    assert "SPEC" not in text and "§" not in text


def test_fixed_names_come_from_their_tables() -> None:
    strategy = SCHEMA["$defs"]["SchedulingStrategy"]["properties"]
    assert strategy["type"]["anyOf"][0]["enum"] == list(SCHEDULING_TYPES)
    assert strategy["target"]["examples"] == list(ROLE_NAMES)


def test_closed_sections_are_the_ones_areal_schema_keeps_closed() -> None:
    node = dataclass_configs.schema_node()
    hints = typing.get_type_hints(dataclass_configs.AReaLConfig)
    for name in dataclasses.fields(dataclass_configs.AReaLConfig):
        if dataclasses.is_dataclass(hints[name.name]):
            # A typed node takes unknown keys only when its own struct flag is false.
            struct = node._get_node(name.name)._get_node_flag("struct")  # type: ignore[union-attr]
            schema = SCHEMA["$defs"][hints[name.name].__name__]
            assert schema["additionalProperties"] is (struct is False), name.name
    assert SCHEMA["additionalProperties"] is True


@pytest.mark.parametrize("cls", DESCRIBED, ids=lambda c: c.__name__)
def test_omegaconf_types_each_field_without_its_schema_notes(cls: type) -> None:
    # The notes ride on Annotated; OmegaConf must type the field as the plain hint.
    node = OmegaConf.structured(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    for name, hint in typing.get_type_hints(cls).items():
        if name not in fields:  # a ClassVar
            continue
        # get_type_hints drops Annotated metadata, as OmegaConf reads hints.
        args = typing.get_args(hint)
        plain = next(a for a in args if a is not type(None)) if type(None) in args else hint
        optional = plain is not hint or hint is Any  # OmegaConf takes None for Any too
        child = node._get_node(name)
        assert child is not None
        assert child._metadata.ref_type is plain, name
        assert child._metadata.optional is optional, name


@pytest.mark.e2e
def test_loading_the_config_imports_no_pydantic() -> None:
    code = (
        "import sys, areal_conf.hydra.structured as c; c.schema_node(); "
        "assert 'pydantic' not in sys.modules, 'pydantic'; "
        "assert 'areal_conf.rules.engines' not in sys.modules, 'engines'"
    )
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr

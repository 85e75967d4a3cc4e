"""The JSON Schema for YAML editors (issue 6): ``python -m areal_conf schema``."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from areal_conf import config as dataclass_configs
from areal_conf.cli import main
from areal_conf.engines import ROLE
from areal_conf.errors import AllocationError
from areal_conf.layouts import layouts
from areal_conf.parser import parse_backend
from areal_conf.schema import (
    ENGINE_MODELS,
    HYDRA_KEYS,
    AReaLConfig,
    backend_pattern,
    json_schema,
)

ROOT = Path(__file__).resolve().parent.parent
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
    return merge(BASE, {engine: {"backend": backend}})


# ------------------------------------------------------------------- the files


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_cli_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == SCHEMA


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
        ("teacher", "(attn:d4|ffn:t2)"),
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
    return alloc.is_inference == (engine == "rollout")


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
        {"teacher": {"backend": ""}},
        {"teacher": {"backend": "megatron:d2p2t4"}},
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


# ------------------------------------------------------- mirror of the dataclasses


def _fields(cls: Any) -> dict[str, Any]:
    return {f.name: f for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    "name, dataclass",
    [
        ("rollout", dataclass_configs.RolloutConfig),
        ("actor", dataclass_configs.TrainEngineConfig),
        ("critic", dataclass_configs.TrainEngineConfig),
        ("ref", dataclass_configs.TrainEngineConfig),
        ("teacher", dataclass_configs.TrainEngineConfig),
        ("cluster", dataclass_configs.ClusterConfig),
        ("model", dataclass_configs.ModelConfig),
    ],
)
def test_models_mirror_the_dataclasses(name: str, dataclass: Any) -> None:
    model = ENGINE_MODELS.get(name) or AReaLConfig.model_fields[name].annotation
    assert model is not None
    assert list(model.model_fields) == list(_fields(dataclass))
    instance = dataclass()
    defaults = model()
    for field in _fields(dataclass):
        if field == "allocation":
            continue  # an interpolation in the dataclass, computed; free in the schema
        value = getattr(instance, field)
        if dataclasses.is_dataclass(value):
            value = dataclasses.asdict(value)  # type: ignore[arg-type]
        mirrored = getattr(defaults, field)
        if hasattr(mirrored, "model_dump"):
            mirrored = mirrored.model_dump()
        assert mirrored == value, (name, field)


def test_root_mirrors_the_dataclass() -> None:
    # Engine sections are not in the Hydra schema (absent unless given); the JSON Schema
    # describes each role's section, optional.
    fields = [f for f in AReaLConfig.model_fields if f not in HYDRA_KEYS and f not in ROLE]
    assert fields == list(_fields(dataclass_configs.AReaLConfig))
    assert [f for f in AReaLConfig.model_fields if f in ROLE] == list(ROLE)
    nested = ENGINE_MODELS["rollout"].model_fields["scheduling_strategy"].annotation
    assert nested is not None
    assert list(nested.model_fields) == list(_fields(dataclass_configs.SchedulingStrategy))

"""The table of AReaL's config keys: how ``scripts/areal_keys.py`` reads it from AReaL's
``cli_args.py``, and that the shipped tables and areal-conf's own keys agree with the
rest of areal-conf. (That each table is AReaL's own dataclasses, and that AReaL's loader
accepts and refuses what areal-conf does, is ``test_areal_loader.py``'s, with AReaL's
source at hand.)"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
from types import ModuleType

import pytest
from _helpers import ROOT

from areal_conf.areal.versions import SUPPORTED, VERSIONS
from areal_conf.config.known_keys import (
    MODEL,
    OWN_CLUSTER_KEYS,
    OWN_ENGINE_KEYS,
    areal_keys,
    section_at,
    top_section,
)
from areal_conf.hydra.structured import ClusterConfig, EngineConfig, ModelConfig


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("areal_keys", ROOT / "scripts" / "areal_keys.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The shapes of field the table tells apart, as cli_args.py writes them.
SOURCE = """
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Optional

class Kind(str, Enum):
    A = "a"

@dataclass
class Spec:
    gpu: int = 0
    env_vars: dict[str, str] = field(default_factory=dict)

@dataclass
class Base:
    backend: str = ""
    spec: tuple[Spec, ...] = ()
    kind: Kind = Kind.A
    names: list[str] | None = None
    kept: ClassVar[int] = 1

@dataclass
class Child(Base):
    one: Optional[Spec] = None
    other: "Spec | None" = None
    anything: Any = None
    backend: str = "x"  # redeclared: keeps its place

class NotADataclass:
    x: int = 0

@dataclass
class BaseExperimentConfig:
    child: Child = field(default_factory=Child)

@dataclass
class GRPOConfig(BaseExperimentConfig):
    pass

_LEGACY_REJECTION_SAMPLING_KEYS = {"old_key"}
_LEGACY_MIGRATION_MESSAGE = "Key 'old_key' was removed.\\nMapping:\\n  old_key=X\\n    -> new: X\\n"

def _migrate(cfg):
    sections_to_check = ["child"]
"""


def test_the_generator_reads_each_kind_of_field() -> None:
    script = generator()
    classes = script.read_classes(SOURCE)
    assert list(classes) == ["Spec", "Base", "Child", "BaseExperimentConfig", "GRPOConfig"]
    assert classes["Spec"] == {"gpu": None, "env_vars": "*"}
    assert classes["Child"] == {
        "backend": None,
        "spec": "Spec[]",
        "kind": None,
        "names": None,
        "one": "Spec",
        "other": "Spec",
        "anything": "*",
    }
    assert script.experiments(SOURCE, classes) == ["BaseExperimentConfig", "GRPOConfig"]
    assert script.removed(SOURCE) == {
        "keys": ["old_key"],
        "sections": ["child"],
        "message": ["Key 'old_key' was removed.", "Mapping:", "old_key=X -> new: X"],
    }


@pytest.mark.parametrize("annotation", ["Spec | Base", "str | Spec"])
def test_the_generator_refuses_a_field_it_cannot_classify(annotation: str) -> None:
    script = generator()
    with pytest.raises(script.UnknownAnnotation):
        script.classify(ast.parse(annotation, mode="eval").body, {"Spec", "Base"})


def test_a_field_that_may_take_any_keys_takes_any_keys() -> None:
    script = generator()
    found = script.classify(ast.parse("dict[str, Spec] | Spec", mode="eval").body, {"Spec"})
    assert found == "*"


@pytest.mark.parametrize("version", SUPPORTED)
def test_each_version_has_a_table_read_at_its_commit(version: str) -> None:
    table = areal_keys(version)
    assert table.version == version
    assert table.commit.startswith(VERSIONS[version].commit)
    data = json.loads((ROOT / "areal_conf" / "data" / f"areal_keys_{version}.json").read_text())
    assert data["generator"] == "scripts/areal_keys.py"
    assert {"GRPOConfig", "SFTConfig", "DPOConfig", "RWConfig", "PPOConfig"} <= set(
        table.experiments
    )


def test_the_tables_are_package_data() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '"data/*.json"' in text


@pytest.mark.parametrize("version", SUPPORTED)
def test_areal_confs_own_keys_are_the_schemas(version: str) -> None:
    """The keys areal_schema adds to AReaL's sections are the ones the check accepts in
    areal-conf's own configs: the schema's dataclasses hold AReaL's keys and these."""
    actor = top_section(version, "actor", {})
    cluster = top_section(version, "cluster", {})
    model = top_section(version, MODEL, {})
    assert actor is not None and cluster is not None and model is not None
    engine_keys = {f.name for f in dataclasses.fields(EngineConfig)}
    assert engine_keys - set(actor.fields) == OWN_ENGINE_KEYS == actor.own
    cluster_keys = {f.name for f in dataclasses.fields(ClusterConfig)}
    assert cluster_keys - set(cluster.fields) == OWN_CLUSTER_KEYS == cluster.own
    assert set(model.fields) == {f.name for f in dataclasses.fields(ModelConfig)}


def test_a_section_is_every_experiment_configs_class_at_its_place() -> None:
    actor = top_section("2.0", "actor", {})
    assert actor is not None
    assert actor.classes == ("TrainEngineConfig", "PPOActorConfig", "DPOEngineConfig")
    assert actor.describe() == "AReaL's PPOActorConfig or DPOEngineConfig"
    assert {"beta", "kl_ctl", "backend"} <= set(actor.fields)
    spec = section_at({"actor": {}}, "actor.scheduling_spec.0", "2.0")
    assert spec is not None and spec.classes == ("SchedulingSpec",)
    assert spec.child("env_vars") is None  # any keys
    assert top_section("2.0", "experiment_name", "x") is None  # top-level keys: a driver's
    assert top_section("2.0", "econfig", {"a": 1}) is None  # a driver's own section
    judge = top_section("2.0", "judge", {"backend": "sglang:d1"})
    assert judge is not None and "InferenceEngineConfig" in judge.classes

"""AReaL 2.0's own example configs, with the verdicts written down for them.

``fixtures/areal2/`` holds configs from AReaL 2.0's ``examples/`` (copied unchanged) and
two synthetic ones, and ``EXPECTED.json`` what areal-conf must conclude for each: the
engines AReaL builds (kind, canonical layout, GPUs, workers, colocation), the ones it
does not build, the GPUs used and available, the warnings, or the key a rejection names.
The verdicts were derived from AReaL's code, not from areal-conf's output. Each config is
checked as a user runs it, ``python train.py --config-dir <its directory> --config-name
<its name>``, as it is and with ``areal_schema`` first in its defaults list, under the
rules areal-conf chooses when no ``areal`` is installed (2.0).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT, Train, compose_config, hydra_composes_parent_paths

from areal_conf import AllocationError, validate

FIXTURES = ROOT / "tests" / "fixtures" / "areal2"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "EXPECTED.json").read_text())["files"]
NAMES = sorted(EXPECTED)
ENGINE_FIELDS = ("kind", "spec", "world_size", "gpus", "replicas", "written", "section")


def test_every_fixture_has_a_verdict() -> None:
    on_disk = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.yaml"))
    assert on_disk == NAMES


def refused_by_this_hydra(name: str) -> bool:
    """The fixture's defaults list climbs to a parent directory (``- ../x``), which only
    some Hydra releases compose: on the others AReaL fails on the file as areal-conf does."""
    text = (FIXTURES / name).read_text()
    return "\n  - ../" in text and not hydra_composes_parent_paths()


def with_schema(tmp_path: Path, name: str) -> Path:
    """A copy of the fixtures whose ``name`` lists ``areal_schema`` first in its defaults
    (the whole tree is copied: defaults lists point at sibling directories)."""
    tree = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, tree)
    path = tree / name
    text = path.read_text()
    if "\ndefaults:\n" in f"\n{text}":
        text = text.replace("defaults:\n", "defaults:\n  - areal_schema\n", 1)
    else:
        text = "defaults:\n  - areal_schema\n  - _self_\n\n" + text
    path.write_text(text)
    return path


def check_plan(plan: dict[str, Any], expected: dict[str, Any]) -> None:
    built = {name: e for name, e in plan["engines"].items() if e["built"]}
    assert list(built) == list(expected["engines"])  # AReaL's creation order
    for name, want in expected["engines"].items():
        got = built[name]
        for field in ENGINE_FIELDS:
            if field in want:
                assert got[field] == want[field], (name, field)
        assert got["colocated_with"] == want["colocated_with"], name
        assert (got["gpu_owner"] if got["colocated_with"] else None) == want["root"], name
        assert got["awex_shared"] == want.get("awex_shared", False), name
    not_built = {name: e["reason"] for name, e in plan["engines"].items() if not e["built"]}
    assert sorted(not_built) == sorted(expected["not_built"])
    for name, reason in not_built.items():
        assert "actor.kl_ctl" in reason if name == "ref" else reason
    assert plan["gpus"]["used"] == expected["gpus"]["used"]
    assert plan["gpus"]["available"] == expected["gpus"]["available"]
    assert plan["cpu_run"] == expected["cpu"]
    # Beside the verdict's warnings, the memory estimate may warn (the model shape comes
    # from actor.path; a GPU's memory is assumed unless given).
    warnings = [w for w in plan["warnings"] if not _is_memory_warning(w)]
    assert len(warnings) == len(expected["warnings"]), warnings
    for want in expected["warnings"]:
        assert any(all(word in w for word in want["mentions"]) for w in warnings), want
    assert plan["areal_rules"]["version"] == "2.0"


def _is_memory_warning(text: str) -> bool:
    return "KV cache" in text or "GB per GPU" in text


def check_rejection(message: str, expected: dict[str, Any]) -> None:
    keys = [expected["key"], *expected.get("alt_keys", [])]
    assert any(f"\n{key}: " in f"\n{message}" for key in keys), message
    for word in expected.get("mentions", []):
        assert word in message


@pytest.mark.parametrize("schema", [False, True], ids=["plain", "schema"])
@pytest.mark.parametrize("name", NAMES)
def test_verdict(name: str, schema: bool, tmp_path: Path) -> None:
    path = with_schema(tmp_path, name) if schema else FIXTURES / name
    if refused_by_this_hydra(name):
        from hydra.errors import ConfigCompositionException

        with pytest.raises(ConfigCompositionException, match=r"Parent traversal \('\.\.'\)"):
            compose_config(config_dir=path.parent, name=path.stem)
        return
    cfg = compose_config(config_dir=path.parent, name=path.stem)
    expected = EXPECTED[name]
    if expected["accept"]:
        check_plan(validate(cfg).to_dict(), expected)
    else:
        with pytest.raises(AllocationError) as info:
            validate(cfg)
        check_rejection(str(info.value), expected)


@pytest.mark.e2e
@pytest.mark.parametrize("schema", [False, True], ids=["plain", "schema"])
@pytest.mark.parametrize("name", NAMES)
def test_train(name: str, schema: bool, train: Train, tmp_path: Path) -> None:
    path = with_schema(tmp_path, name) if schema else FIXTURES / name
    result = train("--config-dir", str(path.parent), "--config-name", path.stem)
    expected = EXPECTED[name]
    assert "Traceback" not in result.stdout + result.stderr
    written = tmp_path / "run" / "allocation_plan.json"
    if refused_by_this_hydra(name):  # Hydra's message, and what to install instead
        assert result.returncode == 1, result.stdout
        assert "Parent traversal ('..')" in result.stderr
        assert "python -m pip install hydra-core==1.4.0.dev1" in result.stderr
        assert not written.exists()
        return
    if expected["accept"]:
        assert result.returncode == 0, result.stderr
        check_plan(json.loads(written.read_text()), expected)
        for want in expected["warnings"]:
            assert "warning: " in result.stdout and want["mentions"][0] in result.stdout
    else:
        assert result.returncode == 2, result.stdout
        check_rejection(result.stderr.split("error: invalid allocation\n", 1)[1], expected)
        assert not written.exists()


@pytest.mark.e2e
def test_a_users_config_yaml_is_not_shadowed_by_the_applications(
    train: Train, tmp_path: Path
) -> None:
    """``--config-name config`` names the user's ``config.yaml``, not conf/config.yaml."""
    result = train("--config-dir", str(FIXTURES / "examples" / "hermes"), "--config-name", "config")
    assert result.returncode == 0, result.stderr
    plan = json.loads((tmp_path / "run" / "allocation_plan.json").read_text())
    assert plan["engines"]["actor"]["spec"] == "megatron:d1"  # hermes', not fsdp:d4t2
    assert plan["cluster"] == {
        "n_nodes": 1,
        "n_gpus_per_node": 2,
        # the suite runs as on a machine without GPUs: the local scheduler's count is the
        # config's
        "gpus_per_node_from": "cluster.n_gpus_per_node, no GPU visible here",
    }

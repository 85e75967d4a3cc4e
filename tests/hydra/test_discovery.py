"""Installed is enough: what every Hydra app in the environment gets from areal-conf.

Each check runs in a fresh interpreter started outside the checkout, so it sees the
installed package only (editable or not), as another application would, and imports
nothing from ``areal_conf`` itself (so the scripts restate ``VERSION_BASE``'s one-line
rule instead of importing it). The same tests run on every Hydra/OmegaConf pair of
the version matrix (``noxfile.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import distribution
from pathlib import Path

import pytest
from _helpers import CONF
from hydra.core.plugins import Plugins
from hydra.plugins.config_source import ConfigLoadError
from hydra.plugins.launcher import Launcher
from hydra.plugins.search_path_plugin import SearchPathPlugin
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

from areal_conf.areal.roles import ALLOCATION_NODE
from areal_conf.config.nodes import is_unset_section
from areal_conf.hydra.structured import EngineConfig
from hydra_plugins.areal_conf_plugin import areal_configs
from hydra_plugins.areal_conf_plugin.areal_configs import (
    AReaLConfigSource,
    AReaLSearchPathPlugin,
)
from hydra_plugins.areal_conf_plugin.areal_launcher import AReaLLauncher
from hydra_plugins.areal_conf_plugin.areal_layouts_sweeper import AReaLLayoutsSweeper

PLUGIN_CLASSES = {
    "areal": AReaLLauncher,
    "areal_layouts": AReaLLayoutsSweeper,
    "areal_configs": AReaLConfigSource,
    "areal_search_path": AReaLSearchPathPlugin,
}


def run_python(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter in ``cwd``; warnings are shown (and failing tests print them)."""
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def areal_modules_of(stdout: str) -> list[str]:
    return [m for m in json.loads(stdout.strip().splitlines()[-1]) if m.startswith("areal_conf")]


# --------------------------------------------------------------- entry points


def test_entry_points_name_each_plugin_class() -> None:
    eps = {ep.name: ep for ep in distribution("areal-conf").entry_points}
    hydra_eps = {name: ep for name, ep in eps.items() if ep.group == "hydra.plugins"}
    assert set(hydra_eps) == set(PLUGIN_CLASSES)
    for name, ep in hydra_eps.items():
        cls = PLUGIN_CLASSES[name]
        assert ep.value == f"{cls.__module__}:{cls.__qualname__}"
        loaded = ep.load()  # by name: Hydra 1.3's scan re-executes plugin modules
        assert (loaded.__module__, loaded.__qualname__) == (cls.__module__, cls.__qualname__)


@pytest.mark.parametrize(
    ("plugin_type", "cls"),
    [
        (Launcher, AReaLLauncher),
        (Sweeper, AReaLLayoutsSweeper),
        (SearchPathPlugin, AReaLSearchPathPlugin),
    ],
)
def test_hydra_discovers_each_plugin(plugin_type: type, cls: type) -> None:
    # by name: Hydra 1.3's scan re-executes plugin modules, so class objects may differ
    names = {f"{c.__module__}.{c.__qualname__}" for c in Plugins.instance().discover(plugin_type)}
    assert f"{cls.__module__}.{cls.__qualname__}" in names


@pytest.mark.e2e
def test_info_plugins_outside_the_checkout(tmp_path: Path) -> None:
    """``--info plugins`` of an unrelated app lists all four plugins, with no warning
    (Hydra 1.4 warns about editable namespace installs it cannot enumerate, unless the
    distribution also declares entry points)."""
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            import hydra
            import hydra.errors

            @hydra.main(config_path=None, **({} if hasattr(hydra.errors,
                        "Hydra15MigrationWarning") else {"version_base": None}))
            def main(cfg):
                pass

            main()
            """
        )
    )
    out = subprocess.run(
        [sys.executable, "-W", "default", str(app), "--info", "plugins"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    for cls in PLUGIN_CLASSES.values():
        assert f"\t\t{cls.__name__}\n" in out.stdout
    assert "Warning" not in out.stderr, out.stderr


# --------------------------------------------------------------- registration on discovery


@pytest.mark.e2e
def test_compose_api_without_importing_areal_conf(tmp_path: Path) -> None:
    """The compose API in a fresh interpreter: areal_schema, the areal. resolvers and the
    launcher config come from the installed plugin."""
    out = run_python(
        """
        import json, sys
        from hydra import compose, initialize_config_dir
        import hydra.errors

        assert not [m for m in sys.modules if m.startswith("areal_conf")]
        kwargs = {} if hasattr(hydra.errors, "Hydra15MigrationWarning") else {"version_base": None}
        with initialize_config_dir(config_dir=sys.argv[1], **kwargs):
            cfg = compose("config", return_hydra_config=True)
        print(cfg.actor.allocation.world_size, cfg.rollout.allocation.spec)
        print(cfg.hydra.launcher._target_)
        print(json.dumps(sorted(sys.modules)))
        """,
        str(CONF),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "8 sglang:d2t4"
    assert lines[1] == "hydra_plugins.areal_conf_plugin.areal_launcher.AReaLLauncher"
    assert "Warning" not in out.stderr, out.stderr


@pytest.mark.e2e
def test_resolvers_in_any_app_and_schema_only_on_demand(tmp_path: Path) -> None:
    """A YAML that does not use areal_schema still resolves ``${areal.world_size:...}``;
    composing it neither builds the schema nor imports the parser until a value is read."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text(
        "gpus: ${areal.world_size:fsdp:d4t2}\n"
        "hybrid: ${areal.world_size:'megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)'}\n"
        "rollout: ${areal.alloc:sglang:d2t4}\n"
    )
    out = run_python(
        """
        import json, sys
        from hydra import compose, initialize_config_dir
        import hydra.errors

        kwargs = {} if hasattr(hydra.errors, "Hydra15MigrationWarning") else {"version_base": None}
        with initialize_config_dir(config_dir=sys.argv[1], **kwargs):
            cfg = compose("app")
        print(json.dumps(sorted(sys.modules)))
        print(cfg.gpus, cfg.hybrid, cfg.rollout.tp)
        print(json.dumps(sorted(sys.modules)))
        """,
        str(tmp_path / "conf"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    before, values, after = out.stdout.splitlines()[-3:]
    assert values == "8 32 4"
    loaded_by_compose = areal_modules_of(before)
    assert "areal_conf.hydra.structured" not in loaded_by_compose
    assert "areal_conf.spec.parser" not in loaded_by_compose
    assert "areal_conf.spec.parser" in areal_modules_of(after)
    assert "areal_conf.hydra.structured" not in areal_modules_of(after)


@pytest.mark.e2e
def test_plugin_modules_import_no_core_module() -> None:
    """What every Hydra app pays at discovery: the four plugin modules, nothing from
    ``areal_conf`` (the resolvers import it when a config first uses one)."""
    out = run_python(
        """
        import json, sys
        from hydra.core.plugins import Plugins

        Plugins.instance()
        print(json.dumps(sorted(sys.modules)))
        """,
        cwd=Path(sys.prefix),
    )
    assert out.returncode == 0, out.stderr
    assert areal_modules_of(out.stdout) == []
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    ours = sorted(m for m in loaded if m.startswith("hydra_plugins.areal_conf_plugin"))
    assert ours == [
        "hydra_plugins.areal_conf_plugin",
        "hydra_plugins.areal_conf_plugin.areal_configs",
        "hydra_plugins.areal_conf_plugin.areal_launcher",
        "hydra_plugins.areal_conf_plugin.areal_layouts_sweeper",
    ]


# --------------------------------------------------------------- the config source


@pytest.fixture
def source() -> AReaLConfigSource:
    return AReaLConfigSource(provider="areal_conf", path="areal-conf://")


def test_source_serves_its_configs(source: AReaLConfigSource) -> None:
    schema = source.load_config("areal_schema")
    # Every role's section is typed, and unset (no engine) until a YAML or override sets it.
    assert is_unset_section(schema.config._get_node("actor"))
    assert schema.config.actor._get_node("allocation")._value() == ALLOCATION_NODE
    assert schema.config.actor.allocation is None  # no engine: nothing to expand
    assert schema.config.cluster.n_gpus_per_node == 8
    engine = source.load_config("areal_engine").config
    assert OmegaConf.get_type(engine) is EngineConfig and engine.backend is None
    assert schema.provider == "areal_conf"
    assert source.load_config("hydra/launcher/areal.yaml").config.dry_run is False
    assert source.load_config("hydra/sweeper/areal_layouts").config.engine == "actor"


def test_source_loads_are_independent_copies(source: AReaLConfigSource) -> None:
    first = source.load_config("areal_schema").config
    first.cluster.n_nodes = 4
    assert source.load_config("areal_schema").config.cluster.n_nodes == 1


@pytest.mark.parametrize(
    ("path", "group", "config"),
    [
        ("", True, False),
        ("hydra", True, False),
        ("hydra/launcher", True, False),
        ("hydra/launcher/", True, False),
        ("hydra/sweeper", True, False),
        ("areal_schema", False, True),
        ("areal_schema.yaml", False, True),
        ("areal_engine", False, True),
        ("hydra/launcher/areal", False, True),
        ("hydra/launcher/areal_joblib", False, True),
        ("hydra/sweeper/areal_layouts", False, True),
        ("hydra/launcher/basic", False, False),
        ("hydra/job_logging", False, False),
        ("config", False, False),
    ],
)
def test_source_groups_and_configs(
    source: AReaLConfigSource, path: str, group: bool, config: bool
) -> None:
    assert (source.is_group(path), source.is_config(path)) == (group, config)


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ("", ["areal_engine", "areal_schema", "hydra"]),
        ("hydra", ["launcher", "sweeper"]),
        (
            "hydra/launcher",
            ["areal", "areal_joblib", "areal_ray", "areal_submitit_local", "areal_submitit_slurm"],
        ),
        ("hydra/sweeper", ["areal_layouts"]),
        ("db", []),
    ],
)
def test_source_lists_a_group(source: AReaLConfigSource, group: str, expected: list[str]) -> None:
    assert source.list(group, results_filter=None) == expected


def test_source_rejects_other_configs(source: AReaLConfigSource) -> None:
    with pytest.raises(ConfigLoadError, match="no config hydra/launcher/basic"):
        source.load_config("hydra/launcher/basic")


def test_every_served_config_builds() -> None:
    for path in areal_configs.configs():
        assert areal_configs.build(path) is not None

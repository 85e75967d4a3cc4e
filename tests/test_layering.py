"""The import graph of the package: dependencies flow one way, text → plan → Hydra.

One table places every module of ``areal_conf`` and of the Hydra plugin in a layer; a
module may import (at the top or inside a function) only modules of its own layer or a
lower one. That rules out import cycles, except the documented edges in
:data:`DEFERRED_EDGES`. A second table lists the third-party packages a module must not
import. The graph is read from the source (every ``import`` statement), so an import
inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import NamedTuple

import pytest
from _helpers import ROOT, run_python

PACKAGES = ("areal_conf", "hydra_plugins.areal_conf_plugin")

#: The parts of the code from the bottom up: a subpackage (all its modules) or a module of
#: the package's top level. A module imports only its own part, its layer, or the layers
#: before it; docs/architecture.md lists the parts in the same order.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("areal_conf.hints",),
    ("areal_conf.errors",),
    (
        "areal_conf.hydra_names",
        "areal_conf.arguments",
        "areal_conf.files",
        "areal_conf.progress",
        "areal_conf.overrides",
        "areal_conf.lazy",
    ),
    ("areal_conf.areal",),
    ("areal_conf.model",),
    ("areal_conf.settings",),
    ("areal_conf.spec",),
    ("areal_conf.config",),
    ("areal_conf.perf",),
    ("areal_conf.plan",),
    ("areal_conf.rules",),
    ("areal_conf.validation",),
    ("areal_conf.advise",),
    ("areal_conf.hydra",),
    ("areal_conf.command",),
    ("areal_conf",),
    ("hydra_plugins.areal_conf_plugin",),
    ("areal_conf.cli",),
    ("areal_conf.__main__",),
)

PARTS: tuple[str, ...] = tuple(part for layer in LAYERS for part in layer)

#: Imports made inside a function to break a cycle within a part, each for a reason.
DEFERRED_EDGES: dict[tuple[str, str], str] = {
    ("areal_conf.spec.allocation", "areal_conf.spec.parser"): (
        "ModelAllocation.from_str is the parser's entry point on the type it builds; "
        "the import is made on the first call"
    ),
    ("hydra_plugins.areal_conf_plugin.areal_launcher", "hydra_plugins.areal_conf_plugin._core"): (
        "Hydra imports every plugin module at discovery, so setup() and launch() import "
        "the work lazily"
    ),
    (
        "hydra_plugins.areal_conf_plugin.areal_launcher",
        "hydra_plugins.areal_conf_plugin._handover",
    ): ("the same: setup() has the sweep's record written atomically"),
}


class Forbidden(NamedTuple):
    """Modules matching ``modules`` (fnmatch patterns), except ``allowed``, must not
    import any of ``imports`` (a package name or a module); with ``at_import``, only
    when they are imported (inside a function is allowed)."""

    why: str
    modules: tuple[str, ...]
    imports: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    at_import: bool = False


#: The core modules that import Hydra or OmegaConf (fnmatch patterns).
HYDRA_FACING = ("areal_conf.hydra", "areal_conf.hydra.*", "areal_conf.command.*", "areal_conf.cli*")

FORBIDDEN: tuple[Forbidden, ...] = (
    Forbidden(
        "the core is plain Python: Hydra-facing modules call it, never the reverse",
        ("areal_conf", "areal_conf.*"),
        ("hydra", "omegaconf"),
        allowed=HYDRA_FACING,
    ),
    Forbidden(
        "the plugin calls the core, never the reverse (Hydra-facing core modules included)",
        ("areal_conf", "areal_conf.*"),
        ("hydra_plugins",),
    ),
    Forbidden(
        "pydantic is paid for only when a JSON Schema is asked for",
        ("areal_conf", "areal_conf.*", "hydra_plugins.*"),
        ("pydantic",),
        allowed=("areal_conf.hydra.schema",),
    ),
    Forbidden(
        "plugin modules are imported by every Hydra app on the machine: the work they "
        "start is imported when it runs",
        (
            "hydra_plugins.areal_conf_plugin",
            "hydra_plugins.areal_conf_plugin.areal_*",
            "hydra_plugins.areal_conf_plugin._configs",
        ),
        (
            "areal_conf",
            "hydra_plugins.areal_conf_plugin._compose",
            "hydra_plugins.areal_conf_plugin._core",
            "hydra_plugins.areal_conf_plugin._handover",
            "hydra_plugins.areal_conf_plugin._sweeper_core",
        ),
        at_import=True,
    ),
)


def module_files() -> dict[str, Path]:
    """Every module of :data:`PACKAGES` and their subpackages, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        folder = ROOT.joinpath(*package.split("."))
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = module_files()


def imports_of(name: str, path: Path, *, top_level: bool = False) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the file that runs: at the top or in
    a function (only at the top with ``top_level``), not under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    if top_level:
        typing_only |= {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for inner in ast.walk(node)
        }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                # `from areal_conf import strategy` imports the submodule.
                sub = f"{base}.{alias.name}"
                yield (sub if sub in MODULES else base), node.lineno


def part_of(module: str) -> str:
    """The part a module belongs to: the longest part its name starts with."""
    found = [p for p in PARTS if module == p or module.startswith(p + ".")]
    if not found:
        raise LookupError(module)
    return max(found, key=len)


def layer_of(module: str) -> int:
    part = part_of(module)
    return next(index for index, layer in enumerate(LAYERS) if part in layer)


def test_every_part_is_placed_once_and_holds_a_module() -> None:
    assert len(PARTS) == len(set(PARTS)), "a part is in two layers"
    assert all(any(part_of(m) == part for m in MODULES) for part in PARTS)


def test_every_subpackage_is_a_part() -> None:
    """A new subpackage takes its place in the layers instead of joining its parent's."""
    packages = {m for m, path in MODULES.items() if path.name == "__init__.py"}
    assert packages <= set(PARTS), sorted(packages - set(PARTS))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_down_the_layers(module: str) -> None:
    own = layer_of(module)
    upward = []
    for imported, line in imports_of(module, MODULES[module]):
        if imported not in MODULES or imported == module:
            continue
        if layer_of(imported) > own and (module, imported) not in DEFERRED_EDGES:
            upward.append(f"line {line}: {imported} ({part_of(imported)})")
    assert not upward, f"{module} ({part_of(module)}) imports a higher layer: {upward}"


@pytest.mark.parametrize("rule", FORBIDDEN, ids=lambda rule: rule.imports[0])
def test_forbidden_imports(rule: Forbidden) -> None:
    broken = []
    for module, path in MODULES.items():
        if not any(fnmatch(module, pattern) for pattern in rule.modules):
            continue
        if any(fnmatch(module, pattern) for pattern in rule.allowed):
            continue
        for imported, line in imports_of(module, path, top_level=rule.at_import):
            if any(imported == f or imported.startswith(f + ".") for f in rule.imports):
                broken.append(f"{module} line {line}: {imported}")
    assert not broken, f"{rule.why}: {broken}"


#: The modules of the core the plugin may import: the public API, the names it shares at
#: Hydra's start, and the interface made for it.
PLUGIN_IMPORTS = ("areal_conf", "areal_conf.hydra_names", "areal_conf.hydra.plugin_api")


def test_the_plugin_imports_only_the_core_s_interface() -> None:
    """The plugin reads the core through :data:`PLUGIN_IMPORTS`, so the core's modules
    can move without touching it."""
    broken = []
    for module, path in MODULES.items():
        if not module.startswith("hydra_plugins."):
            continue
        for imported, line in imports_of(module, path):
            core = imported == "areal_conf" or imported.startswith("areal_conf.")
            public = imported in PLUGIN_IMPORTS or imported.rpartition(".")[0] in PLUGIN_IMPORTS
            if core and not public:
                broken.append(f"{module} line {line}: {imported}")
    assert not broken, broken


def test_each_name_of_the_plugin_s_interface_is_its_module_s() -> None:
    import importlib

    from areal_conf.hydra import plugin_api

    assert sorted(plugin_api.__all__) == sorted(plugin_api._EXPORTS)
    for name, module in plugin_api._EXPORTS.items():
        assert getattr(plugin_api, name) is getattr(importlib.import_module(module), name)


def test_no_import_cycles() -> None:
    """Redundant with the layers while they hold, but it names the cycle."""
    graph: dict[str, set[str]] = {
        module: {
            imported
            for imported, _ in imports_of(module, path)
            if imported in MODULES
            and imported != module
            and (module, imported) not in DEFERRED_EDGES
        }
        for module, path in MODULES.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start, [start])
            assert cycle is None, " -> ".join(cycle)


def test_upward_edges_exist() -> None:
    """A documented exception that no longer exists is taken out of the table."""
    for module, target in DEFERRED_EDGES:
        assert any(i == target for i, _ in imports_of(module, MODULES[module])), (module, target)


@pytest.mark.e2e
def test_the_core_at_work_loads_no_hydra() -> None:
    """The table reads our imports; this runs the core, so that a third-party import
    that pulls Hydra in would show too."""
    core = sorted(
        m
        for m in MODULES
        if m.startswith("areal_conf")
        and not any(fnmatch(m, pattern) for pattern in (*HYDRA_FACING, "areal_conf.__main__"))
    )
    code = "\n".join(
        [
            "import importlib, sys",
            f"for name in {core!r}: importlib.import_module(name)",
            "from areal_conf import layouts, migrate_allocation_mode, parse_backend",
            "from areal_conf import rank_groups, validate",
            "from areal_conf.cli import main",
            "from areal_conf.perf.memory import estimate",
            "parse_backend('megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)')",
            "migrate_allocation_mode('sglang:d4+fsdp:d4')",
            "rank_groups('megatron:d2p2t2')",
            "layouts('megatron', 64)",
            "validate({'rollout': {'backend': 'sglang:d2t2'}, 'actor': {'backend': 'fsdp:d4'}})",
            "estimate('fsdp:d8', {'num_layers': 32, 'hidden_size': 4096, 'vocab_size': 32000,"
            " 'ffn_hidden_size': 11008, 'num_attention_heads': 32})",
            "assert main(['explain', 'fsdp:d4t2', '--groups']) == 0",
            "loaded = sorted(n for n in sys.modules if n.split('.')[0] in"
            " ('hydra', 'omegaconf', 'pydantic'))",
            "assert not loaded, loaded",
        ]
    )
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr


def test_the_architecture_page_lists_the_parts_in_layer_order() -> None:
    """Each part a top-level entry, in layer order; a subpackage's modules nested under it."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## ", 1)[0]  # the parts, before the first section
    parts: list[str] = []
    nested: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line.startswith("- `"):
            parts.append(line[3:].split("`", 1)[0])
            nested[parts[-1]] = []
        elif line.startswith("  - `"):
            nested[parts[-1]].append(line[5:].split("`", 1)[0])
    assert parts == list(PARTS)
    for part, listed in nested.items():
        inside = sorted(m for m in MODULES if part_of(m) == part and m != part)
        assert sorted(listed) == inside, part


def test_the_launcher_target_the_core_knows_is_the_plugin_class() -> None:
    from areal_conf.hydra_names import LAUNCHER_TARGET
    from hydra_plugins.areal_conf_plugin.areal_launcher import AReaLLauncher

    assert f"{AReaLLauncher.__module__}.{AReaLLauncher.__qualname__}" == LAUNCHER_TARGET

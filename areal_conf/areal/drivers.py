"""What an AReaL driver script does with its config, read from its source (parsed with
``ast``, never imported or run).

A driver hands its config class to AReaL's loader (``config, _ = load_expr_config(args,
GRPOConfig)``, AReaL's ``examples/math/gsm8k_rl.py:10``) and then builds what it needs.
AReaL's trainers (``PPOTrainer``, ``SFTTrainer``, ...) build every engine of the config
and run their start-up checks (``areal/trainer/rl_trainer.py``). A driver that builds no
trainer builds only what it reads: an evaluation builds the rollout from
``config.rollout`` alone (``examples/math/gsm8k_eval.py:23-67``), an online rollout its
rollout controller (``examples/experimental/inference_service/online_rollout.py:32-79``).
:func:`driver_scope` tells the engine sections such a script reads; whatever the script
does with the config that this reading cannot follow (it passes the whole config on, or
names it otherwise) means every engine, as a trainer builds them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: A driver script larger than this is not read (a driver is a few hundred lines).
MOST_DRIVER_BYTES: Final = 1_000_000

#: AReaL's schedulers, which take the whole config and build no engine from it: they read
#: its names, ``cluster`` and ``enable_offload`` (``areal/infra/scheduler/local.py:114-166``,
#: ``slurm.py:90-104``, ``ray.py:600-607``) and pass it to the workers the engines'
#: controllers ask them for.
SCHEDULERS: Final = frozenset({"LocalScheduler", "SlurmScheduler", "RayScheduler"})


@dataclass(frozen=True)
class DriverScope:
    """A driver script (``script``, as the command names it) that builds no AReaL
    trainer, and the top-level sections of its config it reads (``engines`` among them:
    the only engines it can build)."""

    script: str
    reads: frozenset[str]

    def builds(self, engine: str) -> bool:
        return engine in self.reads

    def not_built(self, engine: str) -> str:
        """Why the script does not build ``engine``."""
        return f"{self.script} builds no AReaL trainer and does not read {engine}"


def parsed_script(script: Path) -> ast.Module | None:
    """The source of ``script`` parsed, or None when it is no Python it can read."""
    try:
        if not script.is_file() or script.stat().st_size > MOST_DRIVER_BYTES:
            return None
        return ast.parse(script.read_bytes(), filename=str(script))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def loader_calls(tree: ast.Module) -> list[ast.Call]:
    """The script's calls of AReaL's ``load_expr_config``."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and called(node) == "load_expr_config"
    ]


def called(call: ast.Call) -> str | None:
    """The name a call calls (``f`` of ``f(...)`` and of ``module.f(...)``)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def imported_from_areal(tree: ast.Module) -> dict[str, str]:
    """The names the script imports from AReaL's package, by the name it binds."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "areal":
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
    return names


def driver_scope(script: Path, named: str) -> DriverScope | None:
    """The scope of ``script`` (named ``named`` in messages) when its source shows it
    builds no AReaL trainer: it names none, and it uses the config its one
    ``load_expr_config`` returns only as ``config.<section>`` or as an argument of
    AReaL's schedulers. None otherwise: every engine is built."""
    tree = parsed_script(script)
    if tree is None or _names_a_trainer(tree):
        return None
    calls = loader_calls(tree)
    config = _config_name(tree, calls[0]) if len(calls) == 1 else None
    if config is None:
        return None
    names = [node for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == config]
    if sum(isinstance(node.ctx, ast.Store) for node in names) != 1:
        return None  # the name is bound again: which config it holds is not followed
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    schedulers = {bound for bound, name in imported_from_areal(tree).items() if name in SCHEDULERS}
    reads = set()
    for node in names:
        if isinstance(node.ctx, ast.Store):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute):
            reads.add(parent.attr)
            continue
        holder = parents.get(parent) if isinstance(parent, ast.keyword) else parent
        if (
            isinstance(holder, ast.Call)
            and holder.func is not node
            and called(holder) in schedulers
        ):
            continue
        return None  # the whole config goes somewhere this reading cannot follow
    return DriverScope(named, frozenset(reads))


def _names_a_trainer(tree: ast.Module) -> bool:
    """Whether the script names one of AReaL's trainers (``PPOTrainer``, ...), by import
    or as ``areal.PPOTrainer``."""
    names = [*imported_from_areal(tree).values()]
    names += [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    return any(name.endswith("Trainer") for name in names)


def _config_name(tree: ast.Module, call: ast.Call) -> str | None:
    """The name bound to the config ``call`` returns (``config`` of ``config, _ =
    load_expr_config(...)``), when one plain assignment binds it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[0]
            return target.id if isinstance(target, ast.Name) else None
    return None

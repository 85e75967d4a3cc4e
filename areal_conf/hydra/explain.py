"""What ``python -m areal_conf explain`` shows, for a config or for backend strings.

- :func:`explain_config` composes a Hydra config (Hydra is imported here, lazily, so the
  core stays Hydra-free), validates it and returns the plan table and the GPU map, and on
  request the rank groups of every training engine.
- :func:`explain_specs` describes backend strings, optionally placed alone on a cluster
  (GPU map) and with their rank groups.

This module builds what is shown (the composed config's plan, a plan holding one backend
string alone); the text comes from :mod:`areal_conf.plan.report`. Every rejected input is an
``AllocationError`` (Hydra's composition errors are wrapped).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from areal_conf.config.nodes import is_mapping
from areal_conf.config.override_keys import refused_override
from areal_conf.config.yaml_errors import is_yaml_error, unparsable_yaml
from areal_conf.errors import AllocationError, ConfigError, ErrorAtKey
from areal_conf.plan.placement import place
from areal_conf.plan.plan import EnginePlan, Plan
from areal_conf.plan.report import allocation_report, plan_report
from areal_conf.settings import Settings
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.mesh import DEFAULT_ORDER


def compose_config(
    config: str | Path, overrides: Sequence[str] = (), *, areal_version: str | None = None
) -> object:
    """Compose ``config`` (a YAML file, or a directory holding ``config.yaml``) with
    Hydra's compose API and the given overrides; returns the DictConfig."""
    path = Path(config)
    if path.is_dir():
        path = path / "config.yaml"
    if not path.is_file():
        raise ConfigError(
            f"config file {str(path)!r} not found",
            hint="give the primary config, e.g. --config conf/config.yaml",
        )
    if path.suffix not in (".yaml", ".yml"):
        raise ConfigError(
            f"config file {str(path)!r} is not a .yaml file",
            hint="give the primary config, e.g. --config conf/config.yaml",
        )

    return compose_file(path, path.stem, overrides, areal_version=areal_version)


def compose_file(
    path: Path,
    config_name: str,
    overrides: Sequence[str] = (),
    *,
    shown: str | None = None,
    areal_version: str | None = None,
) -> object:
    """Compose ``config_name`` from the directory of ``path`` (the file that name should
    find) with Hydra's compose API, every file it loads within areal-conf's limits
    (:mod:`areal_conf.config.yaml_limits`); Hydra's refusals and a YAML that does not parse are
    one ``AllocationError`` about the file (named ``shown``, by default ``path``). An
    override of a key the config lacks is an :class:`~areal_conf.config.known_keys.UnknownKey`
    whose fix knows AReaL's keys (of ``areal_version``: see ``choose_rules``)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from areal_conf.hydra.compat import VERSION_BASE
    from areal_conf.hydra.files import checked_yaml_files

    try:
        with (
            checked_yaml_files(),
            initialize_config_dir(config_dir=str(path.resolve().parent), **VERSION_BASE),
        ):
            return compose(config_name=config_name, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as err:
        from areal_conf.hydra.errors import typed_value_error

        typed = typed_value_error(err)
        if typed is not None:  # a value a typed config (areal_schema) refused
            raise _checked_against_the_rest(path, config_name, overrides, typed) from None
        override = refused_override(str(err), overrides)
        if override is not None:
            raise _no_such_key(
                path, config_name, overrides, override, shown or str(path), areal_version
            ) from None
        detail = str(err).strip()
        cause = err.__cause__
        if cause is not None and str(cause).strip() and str(cause).strip() not in detail:
            detail += "\n" + str(cause).strip()
        raise ConfigError(
            f"cannot compose {shown or path}: {detail}",
            hint="check the overrides: key=value to change a key, +key=value to add one; "
            "quote values with special characters, e.g. "
            "\"actor.backend='megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)'\"",
        ) from None
    except Exception as err:
        if is_yaml_error(err):
            raise unparsable_yaml(err, path, shown) from None
        if overrides and isinstance(err, ValueError | TypeError | KeyError | IndexError):
            # OmegaConf.update under a value that is no section (`scheduler: [local]`
            # with scheduler.type=local) fails with Python's own error.
            raise _under_a_value(path, config_name, overrides, shown or str(path)) from err
        raise


def _checked_against_the_rest(
    path: Path, name: str, overrides: Sequence[str], error: AllocationError
) -> AllocationError:
    """``error`` (about the override of ``error.key``) with its fixes checked on the
    config composed with the other overrides; as it is when that does not compose."""
    from areal_conf.validation import checked_fix

    rest = [o for o in overrides if o.lstrip("+~").partition("=")[0] != error.key]
    if len(rest) == len(overrides):
        return error  # the value is in the file, not in an override
    try:
        return checked_fix(compose_file(path, name, rest), error)
    except AllocationError:
        return error


def _under_a_value(path: Path, name: str, overrides: Sequence[str], shown: str) -> AllocationError:
    """An override that sets a key under a value of the config that is not a section:
    the override, the value and the fix (replace the value: ``~parent ++key=value``)."""
    try:
        composed: Any = compose_file(path, name, ())
    except AllocationError as err:
        return err
    for override in overrides:
        key, sep, value = override.lstrip("+~").partition("=")
        parts = key.split(".")
        node = composed
        for depth, part in enumerate(parts[:-1]):
            node = node.get(part) if is_mapping(node) else None
            if node is not None and not is_mapping(node):
                parent = ".".join(parts[: depth + 1])
                return ConfigError(
                    f"{override}: {parent} is {node!r} in {shown}, not a section, so {key} "
                    "cannot be set under it",
                    hint=f"replace it: ~{parent} ++{key}={value if sep else '<value>'}, "
                    f"or write {parent} as a section in {shown}",
                )
    return ConfigError(
        f"cannot compose {shown} with the overrides {' '.join(overrides)}",
        hint="check that each override's key is under a section of the config",
    )


def _no_such_key(
    path: Path,
    name: str,
    overrides: Sequence[str],
    override: str,
    shown: str,
    areal_version: str | None,
) -> AllocationError:
    """An override of a key the config lacks, with the key it may mean: from the
    config's keys beside it and AReaL's (Hydra's own advice, ``+key=value``, would reach
    AReaL's loader, which refuses any key its config classes lack)."""
    from areal_conf.areal.versions import choose_rules
    from areal_conf.config.override_keys import missing_key

    rest = [o for o in overrides if o != override]
    try:
        composed: object = compose_file(path, name, rest)
        version: str | None = choose_rules(areal_version).version
    except AllocationError:
        composed, version = None, None
    return missing_key(composed, override, shown, version)


def explain_config(
    config: str | Path,
    overrides: Sequence[str] = (),
    *,
    groups: bool = False,
    order: str = DEFAULT_ORDER,
    settings: Settings | None = None,
) -> str:
    """Plan table and GPU map of a composed config; with ``groups`` the rank groups.
    ``settings``: areal-conf's own knobs (the AReaL version, a GPU's memory, the model)."""
    from areal_conf.validation import validate

    version = settings.areal_version if settings is not None else None
    cfg = compose_config(config, overrides, areal_version=version)
    try:
        plan = validate(cfg, settings=settings)
    except ErrorAtKey as err:  # an override wrote it: the fix rewrites that override
        override = err.given_by(overrides)
        raise err.for_override(override) if override else err from None
    return plan_report(plan, groups=groups, order=order)


def explain_specs(
    specs: Sequence[str],
    *,
    groups: bool = False,
    order: str = DEFAULT_ORDER,
    n_nodes: int | None = None,
    n_gpus_per_node: int | None = None,
    areal_version: str | None = None,
) -> str:
    """Describe each backend string; with a cluster size, place it alone and draw the
    GPU map; with ``groups``, list its rank groups (training backends). A string in the
    ``allocation_mode`` syntax is an error whose fix is written for ``areal_version``'s
    rules (by default the rules in force)."""
    from areal_conf.areal.versions import teacher_layout
    from areal_conf.spec.backends import MAX_SIZE
    from areal_conf.spec.parser import parse_backend

    total = (n_nodes or 1) * (n_gpus_per_node or 8)
    for flag, value in (("--nodes", n_nodes), ("--gpus-per-node", n_gpus_per_node)):
        if value is not None and (value < 1 or total > MAX_SIZE):
            raise ConfigError(
                f"{flag} must be a positive whole number, at most {MAX_SIZE:,} GPUs "
                f"(2**20) in all, got {value}",
                hint=f"e.g. {flag} {2 if flag == '--nodes' else 8}",
            )
    layout = teacher_layout(areal_version)
    blocks = []
    for spec in specs:
        alloc = parse_backend(spec, teacher_layout=layout)
        placed: Plan | None = None
        if n_nodes is not None or n_gpus_per_node is not None:
            per_node = n_gpus_per_node or 8
            nodes = n_nodes or -(-alloc.world_size // per_node)
            placed = place_alone(alloc, nodes, per_node)
        blocks.append(allocation_report(alloc, placed, groups=groups, order=order))
    return "\n\n".join(blocks)


def place_alone(alloc: ModelAllocation, n_nodes: int, n_gpus_per_node: int) -> Plan:
    """A plan holding one engine (named after its backend) placed alone on a cluster."""
    available = n_nodes * n_gpus_per_node
    if alloc.world_size > available:
        nodes = -(-alloc.world_size // n_gpus_per_node)
        raise AllocationError(
            f"{alloc} needs {alloc.world_size} GPUs but {n_nodes} node"
            f"{'s' if n_nodes != 1 else ''} × {n_gpus_per_node} GPUs have {available}",
            str(alloc),
            hint=f"use --nodes {nodes} or more",
        )
    name = alloc.backend
    slots = place([(name, alloc)], n_nodes, n_gpus_per_node)[name]
    engine = EnginePlan(name, alloc, str(alloc), slots=slots)
    return Plan({name: engine}, n_nodes, n_gpus_per_node)

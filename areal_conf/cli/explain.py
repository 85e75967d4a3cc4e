"""``explain`` (backend strings or a config), ``migrate`` (a deprecated allocation_mode)
and ``schema`` (the JSON Schema of the config)."""

from __future__ import annotations

import argparse
from typing import Any

from areal_conf.cli.options import (
    add_settings_options,
    add_version_option,
    settings_from,
)
from areal_conf.errors import AllocationError
from areal_conf.hydra.explain import explain_config, explain_specs


def _explain(args: argparse.Namespace) -> None:
    if args.config is not None:
        if args.nodes is not None or args.gpus_per_node is not None:
            raise AllocationError(
                "--nodes and --gpus-per-node are for backend strings; a config has its cluster",
                hint="override it instead, e.g. cluster.n_nodes=4 cluster.n_gpus_per_node=8",
            )
        print(
            explain_config(
                args.config,
                args.spec,
                groups=args.groups,
                order=args.order,
                settings=settings_from(args),
            )
        )
        return
    if not args.spec:
        raise AllocationError(
            "explain needs backend strings or a config",
            hint="e.g. python -m areal_conf explain fsdp:d4t2 --groups, or "
            "python -m areal_conf explain --config conf/config.yaml rollout.backend=sglang:d4t2",
        )
    print(
        explain_specs(
            args.spec,
            groups=args.groups,
            order=args.order,
            n_nodes=args.nodes,
            n_gpus_per_node=args.gpus_per_node,
            areal_version=args.areal_version,
        )
    )


def _migrate(args: argparse.Namespace) -> None:
    from areal_conf.areal.versions import choose_rules
    from areal_conf.overrides import shell_line
    from areal_conf.spec.legacy import migrate_allocation_mode, migration_yaml

    layout = choose_rules(args.areal_version).rules.teacher_layout
    if args.yaml:
        print(migration_yaml(args.legacy, teacher_layout=layout), end="")
    else:
        # '++' sets a key or adds it: the YAML these go onto may lack some of them (AReaL's
        # examples rarely spell out scheduling_strategy), and Hydra refuses 'key=value'
        # for a key the config does not have.
        overrides = migrate_allocation_mode(args.legacy, teacher_layout=layout)
        print(shell_line(["++" + override for override in overrides]))


def add_explain_command(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="show what backend strings or a config mean: plan, GPU map, rank groups",
        description="explain BACKEND_STRING [BACKEND_STRING ...]: what backend strings mean; "
        "explain --config conf/config.yaml [OVERRIDE ...]: the plan table and per-node GPU "
        "map of a Hydra config. --groups adds the rank groups of training engines.",
    )
    explain.add_argument(
        "spec",
        nargs="*",
        metavar="BACKEND_STRING|OVERRIDE",
        help="backend strings (e.g. fsdp:d4t2), or with --config Hydra overrides "
        "(e.g. rollout.backend=sglang:d4t2)",
    )
    explain.add_argument(
        "--config", "-c", help="a Hydra primary config (YAML file, or a directory with config.yaml)"
    )
    explain.add_argument(
        "--groups", action="store_true", help="also list the rank groups of training engines"
    )
    explain.add_argument(
        "--order", default="tp-cp-ep-dp-pp", help="Megatron rank order (default tp-cp-ep-dp-pp)"
    )
    explain.add_argument(
        "--nodes",
        type=int,
        help="place each backend string alone on this many nodes (GPU map)",
    )
    explain.add_argument(
        "--gpus-per-node",
        type=int,
        help="GPUs per node for --nodes (default 8)",
    )
    add_settings_options(
        explain,
        "with --config: the model's shape for the layout and memory checks, e.g. "
        "--model Qwen/Qwen3-8B (a config.json, a model directory or a Hugging Face "
        "id) or sizes such as num_layers=48; default: from the config's actor.path",
        when="with --config: ",
        mean_response=False,
    )
    explain.set_defaults(run=_explain)


def add_migrate_command(commands: Any) -> None:
    migrate = commands.add_parser(
        "migrate",
        help="translate a deprecated allocation_mode into per-engine overrides",
        description="Translate a deprecated allocation_mode into per-engine overrides. "
        "Each engine says how it is scheduled ('+' separates engines, '|' colocates them), "
        "and each override is written '++key=value', which sets the key or adds it where "
        "the YAML lacks it.",
    )
    migrate.add_argument("legacy", help="e.g. 'sglang:d4t2+fsdp:d8'")
    migrate.add_argument("--yaml", action="store_true", help="print a YAML block instead")
    add_version_option(migrate)
    migrate.set_defaults(run=_migrate)


def add_schema_command(commands: Any) -> None:
    schema = commands.add_parser(
        "schema", help="print a JSON Schema of the config for YAML editors"
    )
    add_version_option(schema)
    schema.set_defaults(run=_schema)


def _schema(args: argparse.Namespace) -> None:
    from areal_conf.areal.versions import choose_rules
    from areal_conf.hydra.schema import schema_json

    print(schema_json(rules=choose_rules(args.areal_version).rules))

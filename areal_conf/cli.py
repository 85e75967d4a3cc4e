"""``python -m areal_conf``: explain a backend string, migrate a legacy allocation_mode,
list every valid layout (``layouts``), print the config's JSON Schema (``schema``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from areal_conf.errors import AllocationError
from areal_conf.explain import explain_config, explain_specs


def _explain(args: argparse.Namespace) -> None:
    if args.config is not None:
        if args.nodes is not None or args.gpus_per_node is not None:
            raise AllocationError(
                "--nodes and --gpus-per-node are for backend strings; a config has its cluster",
                None,
                hint="override it instead, e.g. cluster.n_nodes=4 cluster.n_gpus_per_node=8",
            )
        print(explain_config(args.config, args.spec, groups=args.groups, order=args.order))
        return
    if not args.spec:
        raise AllocationError(
            "explain needs backend strings or a config",
            None,
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
        )
    )


def _migrate(args: argparse.Namespace) -> None:
    from areal_conf.legacy import migrate_allocation_mode, migration_yaml
    from areal_conf.overrides import shell_line

    if args.yaml:
        print(migration_yaml(args.legacy), end="")
    else:
        print(shell_line(migrate_allocation_mode(args.legacy)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m areal_conf", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
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
        "--nodes", type=int, help="place each backend string alone on this many nodes (GPU map)"
    )
    explain.add_argument("--gpus-per-node", type=int, help="GPUs per node for --nodes (default 8)")
    explain.set_defaults(run=_explain)
    migrate = commands.add_parser(
        "migrate", help="translate a deprecated allocation_mode into per-engine overrides"
    )
    migrate.add_argument("legacy", help="e.g. 'sglang:d4t2+fsdp:d8'")
    migrate.add_argument("--yaml", action="store_true", help="print a YAML block instead")
    migrate.set_defaults(run=_migrate)
    from areal_conf.sweeps import add_layouts_command

    add_layouts_command(commands)
    schema = commands.add_parser(
        "schema", help="print a JSON Schema of the config for YAML editors"
    )
    schema.set_defaults(run=_schema)
    return parser


def _schema(args: argparse.Namespace) -> None:
    from areal_conf.schema import schema_json

    print(schema_json())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
        sys.stdout.flush()
    except AllocationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        from areal_conf.app import reader_went_away

        return reader_went_away()  # `... | head` closed the pipe: not an error
    return 0

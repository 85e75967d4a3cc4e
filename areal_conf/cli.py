"""``python -m areal_conf``: explain a backend string, migrate a legacy allocation_mode."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from areal_conf.allocation import ModelAllocation
from areal_conf.errors import AllocationError


def describe(alloc: ModelAllocation) -> str:
    """A few lines a person reads to check what a backend string means."""
    p = alloc.parallel
    lines = [
        f"{alloc}  ({alloc.backend}, {'inference' if alloc.is_inference else 'training'})",
        f"  GPUs: {alloc.world_size}",
    ]
    if alloc.is_inference:
        lines.append(
            f"  {alloc.num_instances} server instance(s) × {alloc.instance_size} GPU(s) "
            f"(tp {p.tp_size} × pp {p.pp_size})"
        )
    else:
        lines.append(f"  attention: dp {p.dp_size}  pp {p.pp_size}  tp {p.tp_size}  cp {p.cp_size}")
        lines.append(
            f"  experts:   edp {p.edp_size}  pp {p.pp_size}  etp {p.etp_size}  ep {p.ep_size}"
        )
    return "\n".join(lines)


def _explain(args: argparse.Namespace) -> None:
    from areal_conf.parser import parse_backend

    for spec in args.spec:
        print(describe(parse_backend(spec)))


def _migrate(args: argparse.Namespace) -> None:
    from areal_conf.legacy import format_overrides, migrate_allocation_mode, migration_yaml

    if args.yaml:
        print(migration_yaml(args.legacy), end="")
    else:
        print(format_overrides(migrate_allocation_mode(args.legacy)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m areal_conf", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="show what backend strings mean")
    explain.add_argument("spec", nargs="+", help="e.g. fsdp:d4t2")
    explain.set_defaults(run=_explain)
    migrate = commands.add_parser(
        "migrate", help="translate a deprecated allocation_mode into per-engine overrides"
    )
    migrate.add_argument("legacy", help="e.g. 'sglang:d4t2+fsdp:d8'")
    migrate.add_argument("--yaml", action="store_true", help="print a YAML block instead")
    migrate.set_defaults(run=_migrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except AllocationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0

"""``migrate``: a deprecated allocation_mode as the per-engine overrides that replace it."""

from __future__ import annotations

import argparse
from typing import Any

from areal_conf.cli.options import add_verb, add_version_option

SUMMARY = "translate a deprecated allocation_mode into per-engine overrides"
DESCRIPTION = (
    "Translate a deprecated allocation_mode into per-engine overrides. "
    "Each engine says how it is scheduled ('+' separates engines, '|' colocates them), "
    "and each override is written '++key=value', which sets the key or adds it where "
    "the YAML lacks it."
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


def add_migrate_command(commands: Any) -> None:
    migrate = add_verb(commands, "migrate", SUMMARY, DESCRIPTION)
    migrate.add_argument("legacy", help="e.g. 'sglang:d4t2+fsdp:d8'")
    migrate.add_argument("--yaml", action="store_true", help="print a YAML block instead")
    add_version_option(migrate)
    migrate.set_defaults(run=_migrate)

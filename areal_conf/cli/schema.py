"""``schema``: the JSON Schema of the config, for YAML editors."""

from __future__ import annotations

import argparse
from typing import Any

from areal_conf.cli.options import add_verb, add_version_option

SUMMARY = "print a JSON Schema of the config for YAML editors"
DESCRIPTION = (
    "Print a JSON Schema of the config for YAML editors: its fields, their types and "
    "defaults, and a pattern for each engine's backend string, so that the editor flags "
    "a malformed one (d4t2 without a backend, fsdp:d4p2) as you type."
)


def add_schema_command(commands: Any) -> None:
    schema = add_verb(commands, "schema", SUMMARY, DESCRIPTION)
    add_version_option(schema)
    schema.set_defaults(run=_schema)


def _schema(args: argparse.Namespace) -> None:
    from areal_conf.areal.versions import choose_rules
    from areal_conf.hydra.schema import schema_json

    print(schema_json(rules=choose_rules(args.areal_version).rules))

"""``python -m areal_conf``: check, run or sweep an AReaL training command; explain a
backend string or a config; migrate a legacy allocation_mode; list, rank and suggest
layouts; print the config's JSON Schema. One module per verb; this one builds the parser
and runs the verb."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from areal_conf.cli.areal_command import add_command_verbs
from areal_conf.cli.explain import add_explain_command
from areal_conf.cli.layouts import add_layouts_command
from areal_conf.cli.migrate import add_migrate_command
from areal_conf.cli.own_options import command_after_separator
from areal_conf.cli.schema import add_schema_command
from areal_conf.cli.suggest import add_suggest_command
from areal_conf.cli.tune import add_tune_command
from areal_conf.errors import AllocationError

_DESCRIPTION = (
    "Check, run or sweep an AReaL training command; explain a backend string or a config; "
    "migrate a legacy allocation_mode; list, rank and suggest layouts; tune them from a "
    "run's log; print the config's JSON Schema."
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("areal-conf")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m areal_conf", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"areal-conf {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_explain_command(commands)
    add_migrate_command(commands)
    add_command_verbs(commands)
    add_layouts_command(commands)
    add_suggest_command(commands)
    add_tune_command(commands)
    add_schema_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the verb; its exit status: 2 with one message for an error areal-conf owns,
    130 or 143 with one line when ``SIGINT`` or ``SIGTERM`` stops it (``SystemExit``)."""
    from areal_conf.hydra.app import EXIT_INVALID, interruptible, output_may_close

    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    with interruptible():
        try:
            args = parser.parse_args(command_after_separator(parser, given))
            with output_may_close():  # `... | head`: the verdict's status, not a broken pipe
                status = args.run(args)
            if isinstance(status, int):
                return status
        except AllocationError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_INVALID
    return 0

"""``check``, ``run`` and ``sweep``: an AReaL training command checked, then run or swept."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from areal_conf.cli.options import MODEL_OF_AREAL_CONFIG, add_settings_options, settings_from
from areal_conf.cli.own_options import add_command_last, refuse_own_options
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.plan.report import plan_report
from areal_conf.settings import (
    Settings,
)

_VERBS = {
    "check": (
        "check an AReaL training command: compose its --config as AReaL does, validate, "
        "print the plan (exit 0, or 2 with the reason); nothing is started",
        "",
    ),
    "run": (
        "check an AReaL training command, then run it unchanged (its exit status is "
        "passed through, signals are forwarded); nothing starts when the check fails",
        "",
    ),
    "sweep": (
        "sweep an AReaL training command over values in Hydra's sweep grammar "
        "(actor.backend=fsdp:d8,fsdp:d4t2): every job is validated before any starts, "
        "then each runs the command with its own overrides through a Hydra launcher",
        " Hydra's options on the same command line (hydra/launcher=joblib, "
        "hydra.launcher.*, hydra.sweep.dir=...) go to Hydra, not to AReaL. Each job's "
        "directory of the sweep gets command.sh, allocation_plan.json and areal_job.json "
        "(overrides, exit status). Exit status: 0 when every job exited 0, 1 otherwise, "
        "2 when the sweep is invalid (nothing started).",
    ),
}


_VERB_HELP = {
    "check": "check an AReaL training command: its plan, or why it would fail",
    "run": "check an AReaL training command, then run it unchanged",
    "sweep": "sweep an AReaL training command, every job checked before any starts",
}


def add_command_verbs(commands: Any) -> None:
    for verb, (summary, more) in _VERBS.items():
        parser: argparse.ArgumentParser = commands.add_parser(
            verb,
            help=_VERB_HELP[verb],
            usage=f"python -m areal_conf {verb} [OPTIONS] [--] AREAL_COMMAND ...",
            description=f"{summary[0].upper()}{summary[1:]}.{more} areal-conf's own options "
            "go before the AReaL command and are never passed to it, e.g. "
            f"python -m areal_conf {verb} --gpu-memory-gb 141 -- python "
            "examples/math/gsm8k_rl.py --config examples/math/gsm8k_grpo.yaml "
            "scheduler.type=local",
        )
        add_settings_options(parser, MODEL_OF_AREAL_CONFIG)
        if verb == "sweep":
            parser.add_argument(
                "--dry-run",
                action="store_true",
                help="validate every job and print its command and plan; start nothing",
            )
        if verb == "check":
            parser.add_argument(
                "--json",
                action="store_true",
                help="print the plan as JSON, as allocation_plan.json holds it, instead of "
                "the table",
            )
        add_command_last(
            parser,
            verb,
            _run_verb,
            metavar="AREAL_COMMAND",
            help="the command you start AReaL with, as you type it: python DRIVER.py "
            "--config YAML [OVERRIDE ...], or areal train run --config YAML --driver "
            "MODULE:FUNC [OVERRIDE ...]",
        )


def _run_verb(args: argparse.Namespace) -> int:
    from areal_conf.command.check import checked_command, run_command

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    refuse_own_options(args, command)
    settings = settings_from(args)
    if args.verb == "sweep":
        return _sweep(command, settings, args.dry_run)
    checked = checked_command(command, settings=settings)
    if checked.unresolved is not None and args.verb == "run":
        # AReaL's loader resolves every value, here: the run would stop at once
        raise ConfigError(
            f"{checked.unresolved.reason}: AReaL's loader resolves every value and would "
            "stop at this one; nothing was started",
            hint=checked.unresolved.hint,
        )
    if args.verb == "check" and args.json:
        print(json.dumps(checked.plan.to_dict(), indent=2))
        return 0
    print(plan_report(checked.plan))
    if checked.unresolved is not None:
        print(
            f"warning: {checked.unresolved.reason}: AReaL's loader resolves every value and "
            f"stops at this one on this machine; {checked.unresolved.hint}"
        )
    if args.verb == "check":
        return 0
    sys.stdout.flush()
    print(f"areal-conf: check passed, running {checked.command.line}", file=sys.stderr)
    try:
        return run_command(checked.command).status
    except OSError as err:
        print(f"error: cannot start {command[0]!r}: {err.strerror or err}", file=sys.stderr)
        return 127 if isinstance(err, FileNotFoundError) else 126


def _sweep(command: list[str], settings: Settings, dry_run: bool) -> int:
    from areal_conf.command.sweep import report_sweep_error, sweep_command

    try:
        return sweep_command(command, settings=settings, dry_run=dry_run)
    except AllocationError:
        raise
    except Exception as exc:
        reported = report_sweep_error(exc)
        if reported is None:
            raise
        message, status = reported
        print(message, file=sys.stderr)
        return status

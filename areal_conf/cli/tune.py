"""``tune``: a real run's steps against the prediction, the model calibrated to the
cluster, and the layouts and split it then predicts fastest."""

from __future__ import annotations

import argparse
from typing import Any

from areal_conf.cli.options import add_advice_options, add_verb, advice_request
from areal_conf.cli.own_options import add_command_last

SUMMARY = "a run's measured step against the prediction, calibrated, and faster layouts"
USAGE = "python -m areal_conf tune RUN --config YAML [OPTIONS] [OVERRIDE ...]"
DESCRIPTION = (
    "Read what an AReaL run logged (RUN: its log directory, "
    "{fileroot}/logs/{user}/{experiment}/{trial}, or its main.log or trainer.log), "
    "leave out its warm-up steps, and print each phase of its steps as measured "
    "against the prediction for the config it ran (--config and the overrides it was "
    "started with). The prediction is then calibrated to the run, and the layouts of "
    "the rollout and the actor on the same GPUs, split anew, are ranked by the "
    "calibrated prediction, each with the overrides to apply. Nothing is written."
)


def _tune(args: argparse.Namespace) -> None:
    from areal_conf.command.check import tune_for_command

    command = list(args.command)
    if command[:1] != ["--"]:  # tune's options may follow RUN: take them, leave the overrides
        options = argparse.ArgumentParser(prog="python -m areal_conf tune", add_help=False)
        _add_options(options)
        _, command = options.parse_known_args(command, namespace=args)
    print(tune_for_command(args.run_log, advice_request(args, command)))


def _add_options(parser: argparse.ArgumentParser) -> None:
    add_advice_options(
        parser,
        config_help="the AReaL experiment YAML the run used",
        top_help="layouts to recommend (default 3)",
        json_help="print measured, predicted, calibration and recommendations as JSON",
    )


def add_tune_command(commands: Any) -> None:
    parser = add_verb(commands, "tune", SUMMARY, DESCRIPTION, usage=USAGE)
    parser.add_argument("run_log", metavar="RUN", help="the run's log directory or log file")
    _add_options(parser)
    add_command_last(
        parser,
        "tune",
        _tune,
        metavar="OVERRIDE",
        help="the Hydra overrides the run was started with (actor.backend=megatron:d4t2), "
        "or its whole AReaL command after --",
    )

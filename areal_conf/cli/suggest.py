"""``suggest``: the predicted-fastest layouts of a config's engines and the rollout/actor
split."""

from __future__ import annotations

import argparse
from typing import Any

from areal_conf.cli.options import add_advice_options, add_verb, advice_request
from areal_conf.cli.own_options import add_command_last

SUMMARY = "the predicted-fastest layouts of a config's engines, and the rollout/actor split"
USAGE = "python -m areal_conf suggest [OPTIONS] --config YAML [OVERRIDE ...]"
DESCRIPTION = (
    "Compose an AReaL experiment YAML as AReaL does, check it, and print "
    "for each training engine the layouts with the shortest predicted training step on "
    "the GPUs it has, for the rollout the layouts with the most decode tokens per "
    "second, and how to split the rollout's and the actor's GPUs so that generation "
    "keeps up with training. The batch comes from train_dataset.batch_size, "
    "gconfig.n_samples, gconfig.max_new_tokens and train_dataset.max_length. "
    "A config that does not start because of its layouts (too few GPUs, too little "
    "memory, a tensor-parallel size the model's heads do not divide) gets its error, "
    "then the layouts that pass on its GPUs. "
    "Instead of --config, the whole AReaL command may follow: python -m areal_conf "
    "suggest -- python examples/math/gsm8k_rl.py --config x.yaml ..."
)


def _suggest(args: argparse.Namespace) -> None:
    from areal_conf.command.check import suggest_for_command

    print(suggest_for_command(advice_request(args, list(args.command))))


def add_suggest_command(commands: Any) -> None:
    parser = add_verb(commands, "suggest", SUMMARY, DESCRIPTION, usage=USAGE)
    add_advice_options(
        parser,
        config_help="the AReaL experiment YAML",
        top_help="layouts to show per engine (default 3)",
        json_help="print the suggestion as JSON, with the predicted RL step and its fastest "
        "layouts",
    )
    add_command_last(
        parser,
        "suggest",
        _suggest,
        metavar="OVERRIDE",
        help="Hydra overrides of the YAML (actor.backend=megatron:d4t2), or the whole AReaL "
        "command after --",
    )

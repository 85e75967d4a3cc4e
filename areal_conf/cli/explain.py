"""``explain``: what backend strings or a config mean (the plan, the GPU map, the rank
groups)."""

from __future__ import annotations

import argparse
from typing import Any

from areal_conf.cli.options import add_settings_options, add_verb, settings_from
from areal_conf.errors import AllocationError
from areal_conf.hydra.explain import explain_config, explain_specs

SUMMARY = "show what backend strings or a config mean: plan, GPU map, rank groups"
DESCRIPTION = (
    "explain BACKEND_STRING [BACKEND_STRING ...]: what backend strings mean; "
    "explain --config conf/config.yaml [OVERRIDE ...]: the plan table and per-node GPU "
    "map of a Hydra config. --groups adds the rank groups of training engines."
)


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


def add_explain_command(commands: Any) -> None:
    explain = add_verb(commands, "explain", SUMMARY, DESCRIPTION)
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

"""``python -m areal_conf``: check, run or sweep an AReaL training command; explain a
backend string or a config; migrate a legacy allocation_mode; list every valid layout
(``layouts``); print the config's JSON Schema (``schema``)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

from areal_conf.all_layouts import layouts
from areal_conf.backends import BACKENDS, MAX_SIZE, join_or
from areal_conf.errors import AllocationError
from areal_conf.explain import explain_config, explain_specs
from areal_conf.model_checks import MODEL_KEYS
from areal_conf.model_shape import SHAPE_KEYS, merge_model
from areal_conf.overrides import shell_sweep_override
from areal_conf.report import columns, decode_rows, memory_text, plan_report, ranked_layout_rows
from areal_conf.roles import ROLE_NAMES
from areal_conf.settings import (
    DEFAULT_GPU_MEMORY_GB,
    Settings,
    from_environment,
    gpu_memory_of,
    positive_gb,
)
from areal_conf.sweeps import (
    check_engine_kind,
    check_engine_name,
    default_engine,
    fitting_layouts,
    parse_model_args,
)

_LAYOUTS_MAX_TP = 8  # the typical GPUs per node
_RANK_TOKENS_PER_STEP = 1 << 20
_RANK_CONCURRENT = 256
#: The most tokens (or sequences) a flag takes: far beyond any run, and small enough that
#: every estimate stays a finite float.
_MOST_TOKENS = 2**40


def settings_from(args: argparse.Namespace) -> Settings:
    """areal-conf's knobs: the environment's, with this command line's options on top."""
    from areal_conf.areal_versions import supported_version

    env = from_environment()
    version = getattr(args, "areal_version", None)
    if version is not None:
        supported_version(version, where="--areal-version")
    gb_text = getattr(args, "gpu_memory_gb", None)
    gb = None if gb_text is None else positive_gb(gb_text, "--gpu-memory-gb")
    gb_from = "--gpu-memory-gb"
    gpu = getattr(args, "gpu", None)
    if gpu is not None:
        from areal_conf.hardware import hardware

        known = hardware(gpu, "--gpu")
        if gb is None:
            gb, gb_from = known.hbm_gb, f"--gpu {gpu}"
    model = parse_model_args(getattr(args, "model", None) or [])
    response = getattr(args, "mean_response_tokens", None)
    if response is not None:
        from areal_conf.settings import positive_tokens

        response = positive_tokens(response, "--mean-response-tokens")
    return Settings(
        areal_version=version,
        gpu=gpu if gpu is not None else env.gpu,
        gpu_memory_gb=gb if gb is not None else env.gpu_memory_gb,
        gpu_memory_from=gb_from if gb is not None else env.gpu_memory_from,
        model=model or env.model,
        model_from="--model" if model else env.model_from,
        mean_response_tokens=response if response is not None else env.mean_response_tokens,
        machine_gpus=env.machine_gpus,
    )


def _explain(args: argparse.Namespace) -> None:
    if args.config is not None:
        if args.nodes is not None or args.gpus_per_node is not None:
            raise AllocationError(
                "--nodes and --gpus-per-node are for backend strings; a config has its cluster",
                None,
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
            areal_version=args.areal_version,
        )
    )


def _migrate(args: argparse.Namespace) -> None:
    from areal_conf.areal_versions import choose_rules
    from areal_conf.legacy import migrate_allocation_mode, migration_yaml
    from areal_conf.overrides import shell_line

    layout = choose_rules(args.areal_version).rules.teacher_layout
    if args.yaml:
        print(migration_yaml(args.legacy, teacher_layout=layout), end="")
    else:
        # '++' sets a key or adds it: the YAML these go onto may lack some of them (AReaL's
        # examples rarely spell out scheduling_strategy), and Hydra refuses 'key=value'
        # for a key the config does not have.
        overrides = migrate_allocation_mode(args.legacy, teacher_layout=layout)
        print(shell_line(["++" + override for override in overrides]))


_DESCRIPTION = (
    "Check, run or sweep an AReaL training command; explain a backend string or a config; "
    "migrate a legacy allocation_mode; list, rank and suggest layouts; print the config's "
    "JSON Schema."
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
    _add_model_option(
        explain,
        "with --config: the model's shape for the layout and memory checks, e.g. "
        "--model hf_config=Qwen/Qwen3-8B (a config.json, a model directory or a Hugging Face "
        "id) or sizes such as num_layers=48; default: from the config's actor.path "
        "(environment: AREAL_CONF_MODEL)",
    )
    _add_gpu_memory_option(explain, "with --config: ")
    _add_gpu_option(explain)
    _add_version_option(explain)
    explain.set_defaults(run=_explain)
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
    _add_version_option(migrate)
    migrate.set_defaults(run=_migrate)
    _add_command_verbs(commands)
    _add_layouts_command(commands)
    _add_suggest_command(commands)
    schema = commands.add_parser(
        "schema", help="print a JSON Schema of the config for YAML editors"
    )
    _add_version_option(schema)
    schema.set_defaults(run=_schema)
    return parser


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


def _add_command_verbs(commands: Any) -> None:
    for verb, (summary, more) in _VERBS.items():
        parser: argparse.ArgumentParser = commands.add_parser(
            verb,
            help=_VERB_HELP[verb],
            usage=f"python -m areal_conf {verb} [OPTIONS] [--] AREAL_COMMAND ...",
            description=f"{summary[0].upper()}{summary[1:]}.{more} areal-conf's own options "
            "go before the AReaL command and are never passed to it, e.g. "
            f"python -m areal_conf {verb} --gpu-memory-gb 141 -- python "
            "examples/math/gsm8k_rl.py --config examples/math/gsm8k_grpo.yaml "
            "scheduler.type=slurm",
        )
        _add_gpu_memory_option(parser)
        _add_gpu_option(parser)
        _add_model_option(
            parser,
            "the model's shape when actor.path does not give it: hf_config=Qwen/Qwen3-8B (a "
            "config.json, a model directory or a Hugging Face id) or sizes such as "
            "num_layers=48 (environment: AREAL_CONF_MODEL)",
        )
        _add_mean_response_option(parser)
        _add_version_option(parser)
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
        parser.add_argument(
            "command",
            nargs=argparse.REMAINDER,
            metavar="AREAL_COMMAND",
            help="the command you start AReaL with, as you type it: python DRIVER.py "
            "--config YAML [OVERRIDE ...], or areal train run --config YAML --driver "
            "MODULE:FUNC [OVERRIDE ...]",
        )
        parser.set_defaults(run=_run_verb, verb=verb, own_options=_own_options(parser))


def _run_verb(args: argparse.Namespace) -> int:
    from areal_conf.areal_command import checked_command, run_command

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    _refuse_own_options(args, command)
    settings = settings_from(args)
    if args.verb == "sweep":
        return _sweep(command, settings, args.dry_run)
    checked = checked_command(command, settings=settings)
    if args.verb == "check" and args.json:
        print(json.dumps(checked.plan.to_dict(), indent=2))
        return 0
    print(plan_report(checked.plan))
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
    from areal_conf.areal_sweep import report_sweep_error, sweep_command

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


def _own_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A verb's options by their strings (``--gpu``, ...), for spotting them in the
    AReaL command."""
    return dict(parser._option_string_actions)


def _add_model_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--model KEY=VALUE [KEY=VALUE ...]``, the same on every verb; repeatable."""
    parser.add_argument(
        "--model", metavar="KEY=VALUE", nargs="+", action="extend", default=[], help=help
    )


def _add_gpu_memory_option(parser: argparse.ArgumentParser, when: str = "") -> None:
    """``--gpu-memory-gb``, the same on every verb (``when``: which of the verb's uses)."""
    parser.add_argument(
        "--gpu-memory-gb",
        metavar="GB",
        help=f"{when}memory of one GPU in GB (10^9 bytes); default: the --gpu's, else "
        f"{DEFAULT_GPU_MEMORY_GB:g} (environment: AREAL_CONF_GPU_MEMORY_GB)",
    )


def _add_gpu_option(parser: argparse.ArgumentParser) -> None:
    from areal_conf.hardware import HARDWARE

    parser.add_argument(
        "--gpu",
        metavar="NAME",
        help=f"the GPU by name ({', '.join(HARDWARE)}): its memory counts unless "
        "--gpu-memory-gb is given (environment: AREAL_CONF_GPU)",
    )


def _add_version_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--areal-version",
        metavar="VERSION",
        help="apply the rules of this AReaL version (1.0 or 2.0); default: "
        "AREAL_CONF_AREAL_VERSION, else the installed areal, else the newest",
    )


def _add_layouts_command(commands: Any) -> None:
    names = join_or(list(BACKENDS))
    parser: argparse.ArgumentParser = commands.add_parser(
        "layouts",
        help="list every valid layout of a backend on N GPUs",
        description="Print every distinct valid layout of BACKEND on exactly --gpus GPUs "
        "(canonical strings, one per line, ordered by pp, tp, cp, ep, etp), or with "
        "--hydra one multirun override that tries them all, to paste after "
        "python train.py -m. "
        "Expert layouts (ep, etp > 1) are listed only when --model sets num_experts.",
    )
    parser.add_argument("backend", help=f"backend name: {names}")
    parser.add_argument(
        "--gpus",
        type=int,  # its range is layouts()'s (all_layouts.py)
        required=True,
        help="the engine's world size (dp×tp×pp×cp)",
    )
    _add_model_option(
        parser,
        "model shape for the layout rules and the memory check, e.g. --model "
        "num_experts=64 num_layers=48, or --model hf_config=/models/x/config.json (keys: "
        + ", ".join((*MODEL_KEYS, *SHAPE_KEYS))
        + ")",
    )
    parser.add_argument(
        "--fits",
        action="store_true",
        help="keep only the layouts whose per-GPU memory fits --gpu-memory-gb, smallest "
        "first, with GB per GPU beside each (needs the model shape: --model hf_config=...)",
    )
    _add_gpu_memory_option(parser, "for --fits and --rank: ")
    _add_gpu_option(parser)
    parser.add_argument(
        "--rank",
        action="store_true",
        help="sort the layouts by predicted time of a training step (inference backends: "
        "by decode tokens per second), with GB/GPU beside; layouts that do not fit come "
        "last (--fits leaves them out); needs the model shape (--model)",
    )
    parser.add_argument(
        "--top",
        type=int,
        metavar="K",
        help="with --rank: keep the K predicted fastest",
    )
    parser.add_argument(
        "--tokens-per-step",
        type=int,
        default=_RANK_TOKENS_PER_STEP,
        metavar="N",
        help="with --rank: tokens of one optimizer step over all data-parallel ranks "
        f"(default {_RANK_TOKENS_PER_STEP:,})",
    )
    parser.add_argument(
        "--concurrent",
        type=_whole(1, MAX_SIZE, f"--concurrent {_RANK_CONCURRENT}"),
        default=_RANK_CONCURRENT,
        metavar="N",
        help="with --rank of sglang or vllm: sequences generated at once "
        f"(default {_RANK_CONCURRENT})",
    )
    parser.add_argument(
        "--context-tokens",
        type=_whole(1, _MOST_TOKENS, "--context-tokens 4096"),
        metavar="N",
        help="with --rank of sglang or vllm: mean tokens of context a decode step attends "
        "to (default: half the model's max_seq_len, else 4096)",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="with --rank: draw predicted step time against GB/GPU per layout into "
        "FILE.png (needs matplotlib: pip install 'areal-conf[plot]')",
    )
    parser.add_argument(
        "--max-tokens-per-mb",
        type=_whole(1, _MOST_TOKENS, "--max-tokens-per-mb 16384"),
        metavar="N",
        help="tokens per micro-batch for --fits (mb_spec.max_tokens_per_mb); default: one "
        "sequence of the model's max_seq_len",
    )
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="for --fits: recompute activations in the backward pass (full recomputation)",
    )
    parser.add_argument(
        "--max-tp",
        type=_max_tp_arg,
        default=_LAYOUTS_MAX_TP,
        metavar="N",
        help=f"largest tensor (and expert tensor) parallel size to list; default "
        f"{_LAYOUTS_MAX_TP}, the typical GPUs per node (give your cluster.n_gpus_per_node), "
        "'none' for no cap",
    )
    parser.add_argument(
        "--hydra",
        action="store_true",
        help="print one multirun override instead, escaped for Hydra and the shell "
        '(e.g. "actor.backend=fsdp:d8,fsdp:d4t2,..."), to paste after python train.py -m',
    )
    parser.add_argument(
        "--engine",
        help="the engine whose backend the --hydra override sets, a role ("
        + ", ".join(ROLE_NAMES)
        + ") or an engine section of AReaL 2.0 (teacher.train, teacher.rollout); default: "
        "rollout for sglang and vllm, actor otherwise. An engine section only your config "
        "defines is swept from that config: sweep ... hydra/sweeper=areal_layouts "
        "hydra.sweeper.engine=NAME",
    )
    parser.set_defaults(run=_layouts)


def _whole(least: int, most: int | None, example: str) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``least`` (to ``most``); anything else
    (``-1``, ``nan``, ``1e9``, ``2**64``) is argparse's usage error (exit 2), with
    ``example`` as the fix."""

    def whole(text: str) -> int:
        try:
            value = int(text.strip().replace("_", ""), 10)
        except ValueError:
            value = None
        if value is None or value < least or (most is not None and value > most):
            upto = "" if most is None else f" to {most:,}"
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {least:,}{upto}, got {text!r} (e.g. {example})"
            )
        return value

    whole.__name__ = "int"
    return whole


def _max_tp_arg(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_SIZE:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or 'none', at most {MAX_SIZE:,}, got {text!r}"
        )
    return value


def _layouts(args: argparse.Namespace) -> None:
    model = merge_model(None, None, parse_model_args(args.model), "--model")
    engine = args.engine or default_engine(args.backend)
    check_engine_name(engine)
    check_engine_kind(engine, args.backend)
    if (args.top is not None or args.plot) and not args.rank:
        raise AllocationError(
            "--top and --plot rank the layouts by predicted speed",
            None,
            None,
            hint="add --rank",
        )
    if args.rank:
        _ranked_layouts(args, model, engine)
        return
    gpu_memory_gb = _gpu_memory_gb(args)
    found = layouts(args.backend, args.gpus, model=model, max_tp=args.max_tp)
    shown = found
    if args.fits:
        knobs: dict[str, Any] = {"gpu_memory_gb": gpu_memory_gb}
        if args.max_tokens_per_mb is not None:
            knobs["tokens_per_microbatch"] = args.max_tokens_per_mb
        if args.gradient_checkpointing:
            knobs["recompute"] = "full"
        ranked = fitting_layouts(found, model, knobs, what="--model")
        found = [spec for spec, _ in ranked]
        width = max((len(spec) for spec in found), default=0)
        shown = [f"{spec.ljust(width)}  {memory_text(est)}" for spec, est in ranked]
        if not found:
            _nothing_fits(args, gpu_memory_gb)
    if not found:
        _no_layout(args)
    if args.hydra:
        print(shell_sweep_override(f"{engine}.backend", found))
    else:
        print("\n".join(shown))


def _gpu_memory_gb(args: argparse.Namespace) -> float:
    """--gpu-memory-gb, else --gpu's memory, else the environment's, else the default."""
    return gpu_memory_of(settings_from(args))[0]


def _nothing_fits(args: argparse.Namespace, gpu_memory_gb: float) -> None:
    hint = "more --gpus, a larger --gpu-memory-gb"
    if not args.gradient_checkpointing and BACKENDS[args.backend].kind == "training":
        hint += ", --gradient-checkpointing"
    raise AllocationError(
        f"no {args.backend} layout on {args.gpus} GPUs fits {gpu_memory_gb:g} GB "
        "per GPU for this model",
        None,
        None,
        hint=f"try {hint} or a smaller --max-tokens-per-mb",
    )


def _no_layout(args: argparse.Namespace) -> None:
    cap = "" if args.max_tp is None else f", tp ≤ {args.max_tp}"
    raise AllocationError(
        f"no valid {args.backend} layout on {args.gpus} GPUs{cap} for this model",
        None,
        None,
        hint="try another --gpus, a larger --max-tp, or check the --model values",
    )


def _ranked_layouts(args: argparse.Namespace, model: dict[str, Any], engine: str) -> None:
    from areal_conf.performance import model_shape_of
    from areal_conf.speed import gpu_for_speed

    shape = model_shape_of(model)
    gpu, said = gpu_for_speed(settings_from(args).gpu)
    gpu_memory_gb = _gpu_memory_gb(args)
    per_node = args.max_tp if args.max_tp is not None else _LAYOUTS_MAX_TP
    if BACKENDS[args.backend].kind == "inference":
        _ranked_inference(args, shape, gpu, said, engine, per_node)
        return
    from areal_conf.ranking import rank_layouts

    microbatch = args.max_tokens_per_mb or shape.max_seq_len
    if microbatch is None:
        raise AllocationError(
            "--rank needs the tokens of a micro-batch",
            None,
            None,
            hint="give --max-tokens-per-mb N (AReaL's mb_spec.max_tokens_per_mb), or the "
            "model's max_seq_len",
        )
    ranked = rank_layouts(
        args.backend,
        args.gpus,
        model,
        gpu=gpu,
        tokens_per_step=args.tokens_per_step,
        tokens_per_microbatch=microbatch,
        n_gpus_per_node=per_node,
        recompute="full" if args.gradient_checkpointing else "none",
        max_tp=args.max_tp,
        gpu_memory_gb=gpu_memory_gb,
        fits_only=args.fits,
        top=args.top,
    )
    if not ranked:
        if args.fits:
            _nothing_fits(args, gpu_memory_gb)
        _no_layout(args)
    if args.plot:
        _plot(args.plot, ranked, gpu_memory_gb, f"{args.backend} on {args.gpus} GPUs, {said}")
    if args.hydra:
        print(shell_sweep_override(f"{engine}.backend", [r.spec for r in ranked]))
        return
    print("\n".join(columns(ranked_layout_rows(ranked, "#"))))
    print(
        f"predicted on {said}: {args.tokens_per_step:,} tokens a step, micro-batches of at "
        f"most {microbatch:,} tokens, {gpu.inter_node_gb_per_s:g} GB/s network per GPU and "
        f"{per_node} GPUs a node; GB/GPU against {gpu_memory_gb:g} GB"
    )
    if args.plot:
        print(f"plot written to {args.plot}")


def _ranked_inference(
    args: argparse.Namespace, shape: Any, gpu: Any, said: str, engine: str, per_node: int
) -> None:
    from areal_conf.ranking import rank_decode

    context = args.context_tokens or (shape.max_seq_len // 2 if shape.max_seq_len else 4096)
    ranked = rank_decode(
        args.backend,
        args.gpus,
        shape,
        gpu=gpu,
        concurrent=args.concurrent,
        context_tokens=context,
        n_gpus_per_node=per_node,
        top=args.top,
    )
    if not ranked:
        raise AllocationError(
            f"no {args.backend} layout on {args.gpus} GPUs keeps a sequence of {context:,} "
            "tokens in its KV cache",
            None,
            None,
            hint="more --gpus, a GPU with more memory (--gpu), or fewer --context-tokens",
        )
    if args.hydra:
        print(shell_sweep_override(f"{engine}.backend", [spec for spec, _ in ranked]))
        return
    print("\n".join(columns(decode_rows(ranked, "#"))))
    print(
        f"predicted on {said}: {args.concurrent:,} sequences at once, {context:,} tokens of "
        "context on average; prefill not counted"
    )


def _plot(path: str, ranked: Sequence[Any], gpu_memory_gb: float, title: str) -> None:
    from areal_conf.plot import plot_layouts

    plot_layouts(path, ranked, gpu_memory_gb, title)


def _suggest(args: argparse.Namespace) -> None:
    from areal_conf.areal_command import suggest_for_command

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    _refuse_own_options(args, command)
    if args.config is not None:
        command = ["--config", args.config, *command]
    print(suggest_for_command(command, settings=settings_from(args), top=args.top))


def _add_suggest_command(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "suggest",
        help="the predicted-fastest layouts of a config's engines, and the rollout/actor split",
        usage="python -m areal_conf suggest [OPTIONS] --config YAML [OVERRIDE ...]",
        description="Compose an AReaL experiment YAML as AReaL does, check it, and print "
        "for each training engine the layouts with the shortest predicted training step on "
        "the GPUs it has, for the rollout the layouts with the most decode tokens per "
        "second, and how to split the rollout's and the actor's GPUs so that generation "
        "keeps up with training. The batch comes from train_dataset.batch_size, "
        "gconfig.n_samples, gconfig.max_new_tokens and train_dataset.max_length. "
        "Instead of --config, the whole AReaL command may follow: python -m areal_conf "
        "suggest -- python examples/math/gsm8k_rl.py --config x.yaml ...",
    )
    parser.add_argument("--config", metavar="YAML", help="the AReaL experiment YAML")
    parser.add_argument(
        "--top",
        type=int,
        default=3,
        metavar="K",
        help="layouts to show per engine (default 3)",
    )
    _add_gpu_memory_option(parser)
    _add_gpu_option(parser)
    _add_mean_response_option(parser)
    _add_model_option(
        parser,
        "the model's shape when actor.path does not give it: hf_config=... (a "
        "config.json, a model directory or a Hugging Face id) or sizes such as num_layers=48",
    )
    _add_version_option(parser)
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="OVERRIDE",
        help="Hydra overrides of the YAML (actor.backend=megatron:d4t2), or the whole AReaL "
        "command after --",
    )
    parser.set_defaults(run=_suggest, verb="suggest", own_options=_own_options(parser))


def _add_mean_response_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mean-response-tokens",
        type=_whole(1, _MOST_TOKENS, "--mean-response-tokens 2048"),
        metavar="N",
        help="the mean response length the predicted step time assumes (default: half of "
        "gconfig.max_new_tokens; environment: AREAL_CONF_MEAN_RESPONSE_TOKENS)",
    )


def _schema(args: argparse.Namespace) -> None:
    from areal_conf.areal_versions import choose_rules
    from areal_conf.schema import schema_json

    print(schema_json(rules=choose_rules(args.areal_version).rules))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the verb; its exit status: 2 with one message for an error areal-conf owns,
    130 or 143 with one line when ``SIGINT`` or ``SIGTERM`` stops it (``SystemExit``)."""
    from areal_conf.app import EXIT_INVALID, interruptible, output_may_close

    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    with interruptible():
        try:
            args = parser.parse_args(_command_after_separator(parser, given))
            with output_may_close():  # `... | head`: the verdict's status, not a broken pipe
                status = args.run(args)
            if isinstance(status, int):
                return status
        except AllocationError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_INVALID
    return 0


# The verbs that take an AReaL command (or overrides) after their own options.
_COMMAND_VERBS = ("check", "run", "sweep", "suggest")


def _verb_parser(parser: argparse.ArgumentParser, verb: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(verb)
            return found
    return None


def _option_values(action: argparse.Action, rest: Sequence[str]) -> int:
    """How many of the tokens ``rest`` after an option are its values."""
    if action.nargs == 0:
        return 0
    if action.nargs == "+":  # KEY=VALUE items, up to the next option or the command
        count = 0
        while count < len(rest) and "=" in rest[count] and not rest[count].startswith("-"):
            count += 1
        return count
    return 1


def _own_options_end(verb_parser: argparse.ArgumentParser, tokens: Sequence[str]) -> int:
    """The index in ``tokens`` (a verb's arguments) where the AReaL command starts."""
    options = verb_parser._option_string_actions
    i = 0
    while i < len(tokens):
        name, inline, _ = tokens[i].partition("=")
        action = options.get(name) if tokens[i].startswith("-") else None
        if action is None:
            return i
        i += 1 if inline else 1 + _option_values(action, tokens[i + 1 :])
    return i


def _command_after_separator(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` with ``--`` between a verb's own options and the AReaL command, where the
    user left it out: ``--model a=1 b=2`` takes KEY=VALUE items, so without the separator
    it would take the command's first words too."""
    verb = next((i for i, token in enumerate(argv) if not token.startswith("-")), None)
    if verb is None or argv[verb] not in _COMMAND_VERBS or "--" in argv[verb + 1 :]:
        return argv
    verb_parser = _verb_parser(parser, argv[verb])
    if verb_parser is None:
        return argv
    rest = argv[verb + 1 :]
    start = _own_options_end(verb_parser, rest)
    if start == len(rest):
        return argv
    return [*argv[: verb + 1], *rest[:start], "--", *rest[start:]]


def _refuse_own_options(args: argparse.Namespace, command: list[str]) -> None:
    """areal-conf's options written after the AReaL command would reach AReaL (whose
    loader reads them as overrides and fails): say where they go instead."""
    from areal_conf.areal_argv import command_error

    options: dict[str, argparse.Action] = args.own_options
    for i, token in enumerate(command):
        name, inline, _ = token.partition("=")
        action = options.get(name) if i > 0 and name not in _AREAL_OPTIONS else None
        if action is None:
            continue
        end = i + 1 + (0 if inline else _option_values(action, command[i + 1 :]))
        moved, kept = command[i:end], command[:i] + command[end:]
        verb = f"python -m areal_conf {args.verb}"
        raise command_error(
            tuple(command),
            i,
            f"{name} is areal-conf's option, and here it is part of the AReaL command, "
            "which would pass it to AReaL",
            f"put it before the AReaL command: {verb} {shlex.join(moved)} -- {shlex.join(kept)}",
        )


# Options of AReaL's own command line that areal-conf's verbs also have.
_AREAL_OPTIONS = frozenset({"--config", "-h", "--help"})

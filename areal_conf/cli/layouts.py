"""``layouts``: every valid layout of a backend on N GPUs, filtered by memory, ranked by
predicted speed, or printed as one Hydra sweep override."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from areal_conf.advise.sweeps import (
    check_engine_kind,
    check_engine_name,
    default_engine,
    fitting_layouts,
)
from areal_conf.areal.roles import ROLE_NAMES
from areal_conf.cli.options import (
    add_settings_options,
    add_verb,
    add_whole_option,
    settings_from,
)
from areal_conf.errors import ConfigError
from areal_conf.model.hardware import FP8_RECIPES
from areal_conf.model.shape import SHAPE_KEYS, merge_model
from areal_conf.overrides import shell_sweep_override
from areal_conf.plan.report import columns, decode_rows, memory_text, ranked_layout_rows
from areal_conf.settings import (
    Settings,
    gpu_memory_of,
)
from areal_conf.spec.backends import BACKENDS, MAX_SIZE, join_or
from areal_conf.spec.layouts import layouts
from areal_conf.spec.model_checks import MODEL_KEYS

_LAYOUTS_MAX_TP = 8  # the typical GPUs per node


_RANK_TOKENS_PER_STEP = 1 << 20


_RANK_CONCURRENT = 256

SUMMARY = "list every valid layout of a backend on N GPUs"
DESCRIPTION = (
    "Print every distinct valid layout of BACKEND on exactly --gpus GPUs "
    "(canonical strings, one per line, ordered by pp, tp, cp, ep, etp), or with "
    "--hydra one multirun override that tries them all, to paste after "
    "python train.py -m. "
    "Expert layouts (ep, etp > 1) are listed only when --model sets num_experts."
)


def add_layouts_command(commands: Any) -> None:
    names = join_or(list(BACKENDS))
    parser = add_verb(commands, "layouts", SUMMARY, DESCRIPTION)
    parser.add_argument("backend", help=f"backend name: {names}")
    parser.add_argument(
        "--gpus",
        type=int,  # its range is layouts()'s (all_layouts.py)
        required=True,
        help="the engine's world size (dp×tp×pp×cp)",
    )
    parser.add_argument(
        "--fits",
        action="store_true",
        help="keep only the layouts whose per-GPU memory fits --gpu-memory-gb, smallest "
        "first, with GB per GPU beside each (needs the model shape: --model hf_config=...)",
    )
    add_settings_options(
        parser,
        "model shape for the layout rules and the memory check, e.g. --model "
        "num_experts=64 num_layers=48, or --model hf_config=/models/x/config.json (keys: "
        + ", ".join((*MODEL_KEYS, *SHAPE_KEYS))
        + ")",
        when="for --fits and --rank: ",
        mean_response=False,
        version=False,
    )
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
    add_whole_option(
        parser,
        "--concurrent",
        _RANK_CONCURRENT,
        f"with --rank of sglang or vllm: sequences generated at once (default {_RANK_CONCURRENT})",
        most=MAX_SIZE,
        default=_RANK_CONCURRENT,
    )
    add_whole_option(
        parser,
        "--context-tokens",
        4096,
        "with --rank of sglang or vllm: mean tokens of context a decode step attends "
        "to (default: half the model's max_seq_len, else 4096)",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="with --rank: draw predicted step time against GB/GPU per layout into "
        "FILE.png (needs matplotlib: pip install 'areal-conf[plot]')",
    )
    add_whole_option(
        parser,
        "--max-tokens-per-mb",
        16384,
        "tokens per micro-batch for --fits (mb_spec.max_tokens_per_mb); default: one "
        "sequence of the model's max_seq_len",
    )
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="for --fits: recompute activations in the backward pass (full recomputation)",
    )
    parser.add_argument(
        "--fp8",
        choices=FP8_RECIPES,
        metavar="RECIPE",
        help="with --rank of megatron: train in FP8 with this scaling recipe ("
        + ", ".join(FP8_RECIPES)
        + "), as megatron.fp8_config.recipe sets it",
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
    settings = settings_from(args)  # --model, else AREAL_CONF_MODEL; the GPU likewise
    model = merge_model(None, None, settings.model, settings.model_from)
    engine = args.engine or default_engine(args.backend)
    check_engine_name(engine)
    check_engine_kind(engine, args.backend)
    if (args.top is not None or args.plot) and not args.rank:
        raise ConfigError(
            "--top and --plot rank the layouts by predicted speed",
            hint="add --rank",
        )
    if args.fp8 and not args.rank:
        raise ConfigError("--fp8 prices FP8 training in the ranking", hint="add --rank")
    if args.fp8 and args.backend != "megatron":
        raise ConfigError(
            f"--fp8: AReaL trains in FP8 on megatron only (megatron.fp8_config), not "
            f"{args.backend}",
            hint="rank megatron layouts (layouts megatron ...), or leave out --fp8",
        )
    if args.rank:
        _ranked_layouts(args, settings, model, engine)
        return
    gpu_memory_gb = gpu_memory_of(settings)[0]
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


def _nothing_fits(args: argparse.Namespace, gpu_memory_gb: float) -> None:
    hint = "more --gpus, a larger --gpu-memory-gb"
    if not args.gradient_checkpointing and BACKENDS[args.backend].kind == "training":
        hint += ", --gradient-checkpointing"
    raise ConfigError(
        f"no {args.backend} layout on {args.gpus} GPUs fits {gpu_memory_gb:g} GB "
        "per GPU for this model",
        hint=f"try {hint} or a smaller --max-tokens-per-mb",
    )


def _no_layout(args: argparse.Namespace) -> None:
    cap = "" if args.max_tp is None else f", tp ≤ {args.max_tp}"
    raise ConfigError(
        f"no valid {args.backend} layout on {args.gpus} GPUs{cap} for this model",
        hint="try another --gpus, a larger --max-tp, or check the --model values",
    )


def _ranked_layouts(
    args: argparse.Namespace, settings: Settings, model: dict[str, Any], engine: str
) -> None:
    from areal_conf.model.shape import shape_of
    from areal_conf.perf.speed import gpu_for_speed

    shape = shape_of(model)
    gpu, said = gpu_for_speed(settings.gpu)
    gpu_memory_gb = gpu_memory_of(settings)[0]
    per_node = args.max_tp if args.max_tp is not None else _LAYOUTS_MAX_TP
    # the layouts asked for (the backend on its GPUs, where they run, how many to show),
    # as either ranking takes them
    asked: dict[str, Any] = {
        "backend": args.backend,
        "gpus": args.gpus,
        "gpu": gpu,
        "n_gpus_per_node": per_node,
        "top": args.top,
    }
    if BACKENDS[args.backend].kind == "inference":
        _ranked_inference(args, shape, said, engine, asked)
        return
    from areal_conf.perf.ranking import rank_layouts

    microbatch = args.max_tokens_per_mb or shape.max_seq_len
    if microbatch is None:
        raise ConfigError(
            "--rank needs the tokens of a micro-batch",
            hint="give --max-tokens-per-mb N (AReaL's mb_spec.max_tokens_per_mb), or the "
            "model's max_seq_len",
        )
    ranked = rank_layouts(
        model=model,
        tokens_per_step=args.tokens_per_step,
        tokens_per_microbatch=microbatch,
        recompute="full" if args.gradient_checkpointing else "none",
        max_tp=args.max_tp,
        gpu_memory_gb=gpu_memory_gb,
        fits_only=args.fits,
        **({"fp8": args.fp8} if args.fp8 else {}),
        **asked,
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
    precision = f" in FP8 ({args.fp8})" if args.fp8 else ""
    print(
        f"predicted on {said}{precision}: {args.tokens_per_step:,} tokens a step, "
        "micro-batches of at "
        f"most {microbatch:,} tokens, {gpu.inter_node_gb_per_s:g} GB/s network per GPU and "
        f"{per_node} GPUs a node; GB/GPU against {gpu_memory_gb:g} GB"
    )
    if args.plot:
        print(f"plot written to {args.plot}")


def _ranked_inference(
    args: argparse.Namespace, shape: Any, said: str, engine: str, asked: dict[str, Any]
) -> None:
    from areal_conf.perf.ranking import rank_decode

    context = args.context_tokens or (shape.max_seq_len // 2 if shape.max_seq_len else 4096)
    ranked = rank_decode(model=shape, concurrent=args.concurrent, context_tokens=context, **asked)
    if not ranked:
        raise ConfigError(
            f"no {args.backend} layout on {args.gpus} GPUs keeps a sequence of {context:,} "
            "tokens in its KV cache",
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
    from areal_conf.advise.plot import plot_layouts

    plot_layouts(path, ranked, gpu_memory_gb, title)

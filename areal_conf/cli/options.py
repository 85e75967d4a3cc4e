"""The options every verb shares (the GPU, its memory, the model, the AReaL version, the
mean response length), declared once, and the settings they give on top of the
environment's."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from areal_conf.settings import DEFAULT_GPU_MEMORY_GB, KNOBS, Settings, from_environment

if TYPE_CHECKING:
    from areal_conf.command.check import AdviceRequest

#: The most tokens (or sequences) a flag takes: far beyond any run, and small enough that
#: every estimate stays a finite float.
MOST_TOKENS = 2**40


def settings_from(args: argparse.Namespace) -> Settings:
    """areal-conf's knobs: the environment's, with this command line's options on top."""
    from areal_conf.areal.versions import supported_version

    version = getattr(args, "areal_version", None)
    if version is not None:
        supported_version(version, where="--areal-version")
    flags = {knob.field: getattr(args, knob.field, None) for knob in KNOBS}
    return from_environment(areal_version=version, flags=flags)


#: Each setting's knob (its flag and variable), by the :class:`Settings` field it sets.
KNOB = {knob.field: knob for knob in KNOBS}


def add_knob_option(
    parser: argparse.ArgumentParser, field: str, metavar: str, help: str, **argument: Any
) -> None:
    """The flag of the setting ``field`` (:data:`KNOB`), its help naming the environment
    variable that gives the same setting."""
    knob = KNOB[field]
    parser.add_argument(
        knob.flag, metavar=metavar, help=f"{help} (environment: {knob.variable})", **argument
    )


def add_model_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--model KEY=VALUE [KEY=VALUE ...]`` (or the model's config.json, directory or
    Hugging Face id), the same on every verb; repeatable."""
    add_knob_option(parser, "model", "KEY=VALUE", help, nargs="+", action="extend", default=[])


def add_gpu_memory_option(parser: argparse.ArgumentParser, when: str = "") -> None:
    """``--gpu-memory-gb``, the same on every verb (``when``: which of the verb's uses)."""
    help = (
        f"{when}memory of one GPU in GB (10^9 bytes); default: the {KNOB['gpu'].flag}'s, "
        f"else {DEFAULT_GPU_MEMORY_GB:g}"
    )
    add_knob_option(parser, "gpu_memory_gb", "GB", help)


def add_gpu_option(parser: argparse.ArgumentParser) -> None:
    from areal_conf.model.hardware import HARDWARE

    help = (
        f"the GPU by name ({', '.join(HARDWARE)}): its memory counts unless "
        f"{KNOB['gpu_memory_gb'].flag} is given"
    )
    add_knob_option(parser, "gpu", "NAME", help)


def add_version_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--areal-version",
        metavar="VERSION",
        help="apply the rules of this AReaL version (1.0 or 2.0); default: "
        "AREAL_CONF_AREAL_VERSION, else the installed areal, else the newest",
    )


def whole(least: int, most: int | None, example: str) -> Callable[[str], int]:
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


def add_whole_option(
    parser: argparse.ArgumentParser,
    flag: str,
    example: int,
    help: str,
    *,
    most: int = MOST_TOKENS,
    default: int | None = None,
) -> None:
    """A whole number from 1 (tokens, sequences), as every such option takes it."""
    parser.add_argument(
        flag, type=whole(1, most, f"{flag} {example}"), default=default, metavar="N", help=help
    )


def add_settings_options(
    parser: argparse.ArgumentParser,
    model_help: str,
    *,
    when: str = "",
    mean_response: bool = True,
    version: bool = True,
) -> None:
    """The options that give :class:`~areal_conf.settings.Settings`, the same on every
    verb: the GPU's memory (``when``: which of the verb's uses), the GPU, the mean
    response length, the model, the AReaL version."""
    add_gpu_memory_option(parser, when)
    add_gpu_option(parser)
    if mean_response:
        add_whole_option(
            parser,
            KNOB["mean_response_tokens"].flag,
            2048,
            "the mean response length the predicted step time assumes (default: half of "
            f"gconfig.max_new_tokens; environment: {KNOB['mean_response_tokens'].variable})",
        )
    add_model_option(parser, model_help)
    if version:
        add_version_option(parser)


#: ``--model`` on the verbs that read an AReaL config: its ``actor.path`` names the model.
MODEL_OF_AREAL_CONFIG = (
    "the model's shape when actor.path does not give it: Qwen/Qwen3-8B (a config.json, a "
    "model directory or a Hugging Face id) or sizes such as num_layers=48"
)


def add_advice_options(
    parser: argparse.ArgumentParser, *, config_help: str, top_help: str, json_help: str
) -> None:
    """The options of the verbs that advise on an AReaL config (``suggest``, ``tune``):
    the YAML, how many layouts to show, JSON output, and the settings."""
    parser.add_argument("--config", metavar="YAML", help=config_help)
    parser.add_argument("--top", type=int, default=3, metavar="K", help=top_help)
    parser.add_argument("--json", action="store_true", help=json_help)
    add_settings_options(parser, MODEL_OF_AREAL_CONFIG)


def advice_request(args: argparse.Namespace, command: list[str]) -> AdviceRequest:
    """What ``suggest`` or ``tune`` is asked, from the options of :func:`add_advice_options`
    and the ``command`` (overrides, or a whole AReaL command after ``--``) that follows
    them; an option of the verb's own written after the command is refused, since AReaL
    would get it."""
    from areal_conf.cli.own_options import refuse_own_options
    from areal_conf.command.check import AdviceRequest

    if command[:1] == ["--"]:
        command = command[1:]
    refuse_own_options(args, command)
    if args.config is not None:
        command = ["--config", args.config, *command]
    return AdviceRequest(command, settings=settings_from(args), top=args.top, as_json=args.json)


def add_verb(
    commands: Any, verb: str, summary: str, description: str, *, usage: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``verb``: ``summary`` is its line in the list of verbs, ``description``
    what its own ``--help`` says of it."""
    parser: argparse.ArgumentParser = commands.add_parser(
        verb, help=summary, description=description, usage=usage
    )
    return parser

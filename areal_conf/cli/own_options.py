"""Keeping areal-conf's own options out of the AReaL command that follows them: ``--``
put where the user left it out, and an option written after the command refused with
the command line to use instead."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import Any


def own_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A verb's options by their strings (``--gpu``, ...), for spotting them in the
    AReaL command."""
    return dict(parser._option_string_actions)


def add_command_last(
    parser: argparse.ArgumentParser, verb: str, run: Any, *, metavar: str, help: str
) -> None:
    """The command (or overrides) that follows the options of ``verb``, declared after
    them, and the options it then has, to spot them in that command."""
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar=metavar, help=help)
    parser.set_defaults(run=run, verb=verb, own_options=own_options(parser))


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
    if action.nargs == "+":  # a first value (--model's Hugging Face id or path), then
        # KEY=VALUE items up to the next option or the command
        count = 1 if rest and not rest[0].startswith("-") else 0
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


def command_after_separator(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
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


def refuse_own_options(args: argparse.Namespace, command: list[str]) -> None:
    """areal-conf's options written after the AReaL command would reach AReaL (whose
    loader reads them as overrides and fails): say where they go instead."""
    from areal_conf.command.argv import command_error

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

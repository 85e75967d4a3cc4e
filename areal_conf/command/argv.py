"""An AReaL training command, read the way AReaL reads it.

AReaL starts training in one of two ways, and both end in its config loader
(``areal.api.cli_args.load_expr_config``), which takes ``--config YAML`` and treats every
other argument as a Hydra override:

- a driver script or module: ``python examples/math/gsm8k_rl.py --config x.yaml
  scheduler.type=slurm actor.backend=megatron:d4p2`` (or ``python -m examples.math.gsm8k_rl
  ...``, or behind a wrapper such as ``uv run`` or ``torchrun``). The arguments after
  the script are the loader's.
- AReaL 2.0's command line: ``areal train run --config x.yaml --driver
  examples.math.gsm8k_rl:main [overrides ...]``; its ``--config`` and ``--driver``
  options may stand anywhere, everything else is passed to the driver as overrides.

:func:`parse_areal_command` finds the driver, the config file and the overrides, and
:meth:`AReaLCommand.with_overrides` writes the same command with other overrides (one job
of a sweep). Nothing here imports Hydra or starts anything.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from areal_conf.errors import AllocationError

#: What the user is shown as a command to put after areal-conf's verb.
EXAMPLE_YAML = "examples/math/gsm8k_grpo.yaml"
EXAMPLE_COMMAND = f"python examples/math/gsm8k_rl.py --config {EXAMPLE_YAML}"
EXAMPLE_AREAL_CLI = f"areal train run --config {EXAMPLE_YAML} --driver examples.math.gsm8k_rl:main"
#: The modules that are AReaL 2.0's ``areal`` command line (``python -m areal.v2.cli``).
AREAL_CLI_MODULES = ("areal.v2.cli", "areal.v2.cli.main")
_CONFIG_OPTION = "--config"
_DRIVER_OPTION = "--driver"

Form = Literal["script", "module", "areal train run"]
#: AReaL's SPMD launchers (``python -m areal.infra.launcher.local DRIVER.py ...``, the
#: legacy mode of docs/en/tutorial/quickstart.md), which areal-conf does not check.
SPMD_LAUNCHERS: Final = tuple(
    f"{package}.{name}"
    for package in ("areal.infra.launcher", "areal.launcher")
    for name in ("local", "ray", "slurm")
)


@dataclass(frozen=True)
class AReaLCommand:
    """One AReaL training command, split as AReaL's loader splits it.

    ``argv`` is the command as given; ``driver`` the script, module or ``module:func``
    it starts (``form`` says which); ``config`` the ``--config`` value as written and
    ``config_path`` the file it names (relative to ``cwd``); ``overrides`` the Hydra
    overrides in their order, at the positions ``override_indices`` of ``argv``.
    """

    argv: tuple[str, ...]
    form: Form
    driver: str
    config: str
    overrides: tuple[str, ...]
    override_indices: tuple[int, ...]
    cwd: str

    @property
    def config_path(self) -> Path:
        return Path(self.cwd, self.config)

    @property
    def line(self) -> str:
        """The command as one POSIX shell line."""
        return shlex.join(self.argv)

    def with_overrides(self, overrides: Sequence[str]) -> list[str]:
        """This command with ``overrides`` in place of its own: every other argument
        stays where it is, the new overrides come last (in their order, which is the
        order Hydra applies them in)."""
        dropped = set(self.override_indices)
        kept = [arg for i, arg in enumerate(self.argv) if i not in dropped]
        return [*kept, *overrides]


def parse_areal_command(
    argv: Sequence[str], cwd: str | os.PathLike[str] | None = None
) -> AReaLCommand:
    """Read ``argv`` (an AReaL training command) the way AReaL does; an
    :class:`AllocationError` pointing at the argument when it cannot be read."""
    args = tuple(str(arg) for arg in argv)
    where = str(cwd) if cwd is not None else os.getcwd()
    if not args:
        raise AllocationError(
            "no AReaL command given",
            hint=f"put the command you run AReaL with after the verb, e.g. {EXAMPLE_COMMAND}",
        )
    _refuse_assignments(args)
    form, driver, first = _driver_start(args)
    if form == "areal train run":
        return _areal_cli(args, driver, first, where)
    config, config_indices = _loader_config(args, first)
    overrides = [i for i in range(first, len(args)) if i not in config_indices]
    return AReaLCommand(
        args, form, driver, config, tuple(args[i] for i in overrides), tuple(overrides), where
    )


def parse_config_command(
    argv: Sequence[str], cwd: str | os.PathLike[str] | None = None
) -> AReaLCommand:
    """``--config YAML [OVERRIDE ...]`` without a driver (what ``suggest`` takes), or a
    whole AReaL command: read as :func:`parse_areal_command` reads the command's part
    after its driver. The result is composed, never run."""
    args = tuple(str(arg) for arg in argv)
    if not args or not args[0].startswith("--conf"):
        return parse_areal_command(args, cwd)
    where = str(cwd) if cwd is not None else os.getcwd()
    config, config_indices = _loader_config(args, 0)
    overrides = [i for i in range(len(args)) if i not in config_indices]
    return AReaLCommand(
        args, "script", "", config, tuple(args[i] for i in overrides), tuple(overrides), where
    )


def _refuse_assignments(args: tuple[str, ...]) -> None:
    """Refuse ``NAME=value`` in front of the program (``CUDA_VISIBLE_DEVICES=0,1 python
    ...``, or after ``env``): the command would see a variable areal-conf's check does
    not (the GPUs AReaL's local scheduler counts, a ``${oc.env:NAME}`` value)."""
    start = 1 if args[:1] == ("env",) else 0
    end = start
    while end < len(args) and _is_assignment(args[end]):
        end += 1
    if end == start:
        return
    name = args[start].partition("=")[0]
    raise command_error(
        args,
        start,
        f"{name} is set for the command alone, and areal-conf checks the command with its "
        "own environment (the GPUs AReaL's local scheduler counts, the values of "
        "${oc.env:...})",
        "set it for areal-conf instead (the command gets areal-conf's environment), e.g. "
        + shlex.join([*args[start:end], "python", "-m", "areal_conf", "check", "--", *args[end:]]),
    )


def _is_assignment(arg: str) -> bool:
    """``NAME=value``, as a POSIX shell reads an environment assignment."""
    name, equals, _ = arg.partition("=")
    return bool(equals) and name.isidentifier() and name.isascii()


def _driver_start(args: tuple[str, ...]) -> tuple[Form, str, int]:
    """(form, driver, index of the first argument after it)."""
    for i, arg in enumerate(args):
        name = os.path.basename(arg)
        if name == "areal" and not arg.startswith("-"):
            return "areal train run", arg, _train_run(args, i + 1)
        if arg.endswith(".py") and not arg.startswith("-"):
            return "script", arg, i + 1
        if arg == "-m" or (arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--")):
            module = arg[2:] if arg != "-m" else (args[i + 1] if i + 1 < len(args) else "")
            after = i + 1 if arg != "-m" else i + 2
            if not module:
                raise command_error(
                    args,
                    i,
                    "-m names no module",
                    f"e.g. python -m examples.math.gsm8k_rl --config {EXAMPLE_YAML}",
                )
            if module in AREAL_CLI_MODULES:
                return "areal train run", f"python -m {module}", _train_run(args, after)
            if module in SPMD_LAUNCHERS:
                driver = next((a for a in args[after:] if not a.startswith("-")), "DRIVER.py")
                raise command_error(
                    args,
                    i if arg != "-m" else i + 1,
                    f"{module} is AReaL's SPMD launcher (legacy: it starts the driver under "
                    "torchrun, and reads the top-level allocation_mode); areal-conf checks "
                    "the driver started as a script, which AReaL recommends",
                    "check the command without the launcher: "
                    + shlex.join(["python", driver, *args[args.index(driver) + 1 :]])
                    if driver in args
                    else f"e.g. {EXAMPLE_COMMAND}",
                )
            return "module", module, after
    raise command_error(
        args,
        None,
        "cannot find the AReaL driver in this command: no .py script, no -m module, no "
        "'areal train run'",
        f"give the command you start training with, e.g. {EXAMPLE_COMMAND}, or {EXAMPLE_AREAL_CLI}",
    )


def _train_run(args: tuple[str, ...], i: int) -> int:
    """The index after ``train run`` of AReaL's command line (the only command that
    starts a training run)."""
    words = list(args[i : i + 2])
    if words != ["train", "run"]:
        shown = " ".join(words) or "nothing"
        raise command_error(
            args,
            i if i < len(args) else None,
            f"the areal command line starts training only with 'areal train run', got {shown!r}",
            f"e.g. {EXAMPLE_AREAL_CLI}",
        )
    return i + 2


def _loader_config(args: tuple[str, ...], first: int) -> tuple[str, set[int]]:
    """The ``--config`` value as AReaL's loader reads it (``argparse`` with one option:
    ``--config X``, ``--config=X`` or a prefix such as ``--conf X``; the last one wins),
    and the indices of its arguments."""
    value: str | None = None
    used: set[int] = set()
    i = first
    while i < len(args):
        name, eq, given = args[i].partition("=")
        if len(name) >= 3 and _CONFIG_OPTION.startswith(name):
            if eq:
                value, used = given, used | {i}
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                value, used = args[i + 1], used | {i, i + 1}
                i += 1
            else:
                raise command_error(
                    args,
                    i,
                    f"{args[i]} expects the config file after it",
                    f"e.g. --config {EXAMPLE_YAML}",
                )
        i += 1
    if value is None:
        # A YAML given without the option: it goes after --config, where it is.
        bare = next(
            (
                n
                for n in range(first, len(args))
                if args[n].endswith((".yaml", ".yml")) and "=" not in args[n]
            ),
            None,
        )
        if bare is not None:
            fixed = [*args[:bare], "--config", *args[bare:]]
            hint = f"give the experiment YAML after --config: {shlex.join(fixed)}"
        else:
            hint = f"add the experiment YAML, e.g. {shlex.join(args)} --config {EXAMPLE_YAML}"
        raise command_error(
            args, bare, "this AReaL command has no --config: AReaL's loader requires one", hint
        )
    return value, used


def _areal_cli(args: tuple[str, ...], program: str, first: int, cwd: str) -> AReaLCommand:
    """``areal train run``: its options ``--config`` and ``--driver`` (``--name X`` or
    ``--name=X``, anywhere), every other argument an override passed to the driver."""
    values: dict[str, tuple[str, set[int]]] = {}
    overrides: list[int] = []
    i = first
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in (_CONFIG_OPTION, _DRIVER_OPTION):
            if eq:
                values[name] = (value, {i})
            elif i + 1 < len(args):
                values[name] = (args[i + 1], {i, i + 1})
                i += 1
            else:
                raise command_error(
                    args, i, f"{name} expects a value after it", f"e.g. {EXAMPLE_AREAL_CLI}"
                )
        else:
            overrides.append(i)
        i += 1
    for option in (_CONFIG_OPTION, _DRIVER_OPTION):
        if option not in values:
            raise command_error(
                args, None, f"'areal train run' requires {option}", f"e.g. {EXAMPLE_AREAL_CLI}"
            )
    driver = values[_DRIVER_OPTION][0]
    if ":" not in driver:
        index = max(values[_DRIVER_OPTION][1])
        raise command_error(
            args,
            index,
            f"--driver must be in 'module.path:func' form, got {driver!r}",
            "e.g. --driver examples.math.gsm8k_rl:main",
        )
    return AReaLCommand(
        args,
        "areal train run",
        driver,
        values[_CONFIG_OPTION][0],
        tuple(args[j] for j in overrides),
        tuple(overrides),
        cwd,
    )


def command_error(
    args: tuple[str, ...], index: int | None, reason: str, hint: str
) -> AllocationError:
    """An error about argument ``index`` of ``args`` (the whole command when None), shown
    under the command line with the argument underlined."""
    line = shlex.join(args)
    if index is None:
        return AllocationError(reason, line, None, hint=hint)
    quoted = [shlex.quote(arg) for arg in args]
    position = sum(len(q) + 1 for q in quoted[:index])
    return AllocationError(reason, line, position, length=len(quoted[index]), hint=hint)

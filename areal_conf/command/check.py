"""Check an AReaL training command before it starts, and start it when it passes.

``python -m areal_conf check <AReaL command>`` and ``run`` take the command exactly as
the user types it for AReaL (``python examples/math/gsm8k_rl.py --config x.yaml
scheduler.type=slurm ...`` or ``areal train run ...``). :func:`check_command` reads it as
AReaL's loader does (:mod:`areal_conf.command.argv`), composes ``--config`` with its
overrides the way the loader composes it (Hydra's compose API on the YAML's directory,
the config name being the file name up to ``.yaml``), validates the result with the
rules of the AReaL version in use and returns the plan. No driver is imported or
started. :func:`run_command` then runs the command unchanged (same arguments,
environment and working directory) and returns its exit status.

Hydra-facing: Hydra is imported when a command is composed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from areal_conf.arguments import optional_path, strings
from areal_conf.command.argv import AReaLCommand, command_error, parse_areal_command
from areal_conf.command.process import Finished, run_forwarding
from areal_conf.errors import AllocationError, ErrorAtKey
from areal_conf.overrides import format_overrides
from areal_conf.plan.plan import Plan
from areal_conf.settings import Settings, optional_settings

if TYPE_CHECKING:
    from areal_conf.config.run_reading import Reading
    from areal_conf.model.hardware import Hardware
    from areal_conf.model.shape import ModelShape
    from areal_conf.validation import Validation

_Advice = TypeVar("_Advice")

#: The file suffix AReaL's loader strips to name the config it composes.
AREAL_CONFIG_SUFFIX = ".yaml"


@dataclass(frozen=True)
class CheckedCommand:
    """An AReaL command that passed the check, and its plan. ``unresolved``: the first
    value AReaL's loader could not resolve on this machine (it resolves every value, as
    areal-conf does only for the keys it reads): an unset ``${oc.env:X}``, say, which the
    machine the command runs on may set."""

    command: AReaLCommand
    plan: Plan
    unresolved: AllocationError | None = None


def check_command(
    argv: Sequence[str],
    *,
    settings: Settings | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Plan:
    """The plan of the AReaL training command ``argv`` (composed as AReaL composes it,
    checked with the rules of the AReaL version in use), or an ``AllocationError``
    saying what is wrong with the command or its config. ``cwd``: where the command
    would run (default: here); ``settings``: areal-conf's own knobs (the AReaL version,
    a GPU's memory, the model), never part of the command."""
    return checked_command(argv, settings=settings, cwd=cwd).plan


def checked_command(
    argv: Sequence[str],
    *,
    settings: Settings | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> CheckedCommand:
    """:func:`check_command`, returning the command as read beside its plan."""
    argv = strings("argv", argv, example='shlex.split("python examples/math/gsm8k_rl.py ...")')
    cwd = optional_path("cwd", cwd, example="e.g. the AReaL checkout, or None for here")
    settings = optional_settings(settings)
    command = parse_areal_command(argv, cwd)
    refuse_sweeps(command)
    version = settings.areal_version if settings is not None else None
    cfg = compose_as_areal(command, areal_version=version)
    return CheckedCommand(command, _validated(command, cfg, settings), unresolved_value(cfg))


def unresolved_value(cfg: Any) -> AllocationError | None:
    """The first value of a composed config that does not resolve here, as an error
    naming its key; None when every value resolves."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from areal_conf.config.nodes import unresolvable

    try:
        OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        return unresolvable(getattr(err, "full_key", None) or None, err)
    return None


@dataclass(frozen=True)
class _ForPrediction:
    """A command's config checked, with what ``suggest`` and ``tune`` predict from:
    its validation, or the layout error it did not pass (``suggest`` only)."""

    reading: Reading
    checked: Validation | AllocationError
    shape: ModelShape
    gpu: Hardware
    gpu_said: str
    gpu_memory_gb: float
    settings: Settings

    def advise(self, advice: Callable[..., _Advice], *first: Any, top: int) -> _Advice:
        """``advice`` (``suggest``, ``tuning``) on this config, after the arguments
        ``first`` of its own."""
        return advice(
            *first,
            self.reading,
            self.checked,
            self.shape,
            gpu=self.gpu,
            gpu_said=self.gpu_said,
            gpu_memory_gb=self.gpu_memory_gb,
            mean_response_tokens=self.settings.mean_response_tokens,
            top=top,
        )


@dataclass(frozen=True)
class AdviceRequest:
    """What ``suggest`` and ``tune`` are asked: the config's command (``--config YAML
    [OVERRIDE ...]`` or a whole AReaL command), areal-conf's settings (the environment's
    when None), the directory the command runs in (the current one when None), how many
    layouts to show, and JSON rather than text."""

    argv: Sequence[str]
    settings: Settings | None = None
    cwd: str | os.PathLike[str] | None = None
    top: int = 3
    as_json: bool = False

    def answer(self, found: Any, text: Callable[[Any], str]) -> str:
        """``found`` as JSON or, by ``text``, as text."""
        import json

        return json.dumps(found.to_dict(), indent=2) if self.as_json else text(found)


def _for_prediction(
    verb: str, request: AdviceRequest, *, refused: frozenset[str] = frozenset()
) -> _ForPrediction:
    """The config of the request's command composed as AReaL composes it and checked (a
    config that would not start gets its error, unless a rule of ``refused`` gave it: that
    error is then kept in place of the validation), with the model's shape, which ``verb``
    needs."""
    from areal_conf.command.argv import parse_config_command
    from areal_conf.model.shape import ModelShape, model_shape
    from areal_conf.perf.speed import gpu_for_speed
    from areal_conf.settings import default_settings, gpu_memory_of
    from areal_conf.validation import validate_run

    top = request.top
    if type(top) is not int or top < 1:
        raise AllocationError(f"--top must be a positive integer, got {top!r}", hint="e.g. --top 3")
    settings = request.settings if request.settings is not None else default_settings()
    command = parse_config_command(request.argv, request.cwd)
    cfg = compose_as_areal(command, areal_version=settings.areal_version)
    reading = _read(command, cfg, settings)
    checked: Validation | AllocationError
    try:
        checked = validate_run(reading)
        shape = checked.shape
    except AllocationError as err:
        if err.rule not in refused:
            raise
        checked = err
        model = reading.model
        shape = model_shape(model.keys) if model.keys else model.missing or "no model given"
        if not isinstance(shape, ModelShape):
            raise
    if not isinstance(shape, ModelShape):
        raise AllocationError(
            f"{verb} needs the model's shape: {shape}",
            hint="give it with --model hf_config=<the model's config.json, directory or "
            "Hugging Face id> (or AREAL_CONF_MODEL)",
        )
    gpu, said = gpu_for_speed(settings.gpu)
    memory_gb, _, _ = gpu_memory_of(settings, reading.run.cluster.gpu_memory_gb)
    return _ForPrediction(reading, checked, shape, gpu, said, memory_gb, settings)


def suggest_for_command(request: AdviceRequest) -> str:
    """What ``python -m areal_conf suggest`` prints for the request's command: the config
    is composed as AReaL composes it and checked first, so a config that would not start
    gets its error instead, or, when its layouts are what stops it, that error and the
    layouts that pass."""
    from areal_conf.advise.suggest import LAYOUT_RULES, suggest, suggestion_text

    given = _for_prediction("suggest", request, refused=LAYOUT_RULES)
    return request.answer(given.advise(suggest, top=request.top), suggestion_text)


def tune_for_command(run_log: str | os.PathLike[str], request: AdviceRequest) -> str:
    """What ``python -m areal_conf tune RUN`` prints for the run whose log is at
    ``run_log`` and the request's command, the one it was started with."""
    from areal_conf.advise.run_logs import read_log
    from areal_conf.advise.tune import tune_text, tuning

    log = read_log(run_log)
    found = _for_prediction("tune", request).advise(tuning, log, top=request.top)
    return request.answer(found, tune_text)


def run_command(command: AReaLCommand, *, env: Mapping[str, str] | None = None) -> Finished:
    """Run ``command`` as given, in its working directory, forwarding signals; its exit
    status as a shell reports it. ``OSError`` when it cannot be started."""
    return run_forwarding(command.argv, cwd=command.cwd, env=env)


def compose_as_areal(
    command: AReaLCommand,
    overrides: Sequence[str] | None = None,
    *,
    areal_version: str | None = None,
) -> Any:
    """The config AReaL's loader composes for ``command`` (with ``overrides`` in place of
    the command's own, for one job of a sweep): the ``--config`` file's directory is the
    config directory, the file name up to ``.yaml`` the config name. An override of a key
    the YAML lacks points at the override, with the key it may mean among the YAML's and
    AReaL ``areal_version``'s keys. As AReaL merges the YAML onto its dataclasses before
    resolving it, a key an interpolation names and the YAML lacks gets AReaL's default."""
    from omegaconf import DictConfig, OmegaConf

    from areal_conf.areal.versions import choose_rules
    from areal_conf.config.areal_defaults import referenced_defaults
    from areal_conf.hydra.explain import compose_file

    path = config_file(command)
    given = command.overrides if overrides is None else tuple(overrides)
    parse_overrides(command, given)
    name = path.name.split(AREAL_CONFIG_SUFFIX)[0]
    try:
        cfg = compose_file(path, name, given, shown=command.config, areal_version=areal_version)
    except ErrorAtKey as err:
        override = err.given_by(given)
        if override is None:
            raise
        raise _about_override(
            command,
            _override_index(command, override, given.index(override)),
            override,
            err.reason,
            err.hint,
        ) from None
    assert isinstance(cfg, DictConfig)  # what Hydra's compose returns
    for key, default in referenced_defaults(cfg, choose_rules(areal_version).version).items():
        OmegaConf.update(cfg, key, default, force_add=True)
    return cfg


def _validated(command: AReaLCommand, cfg: Any, settings: Settings | None) -> Validation:
    """``validate(cfg)``; a key AReaL lacks that one of the command's overrides wrote is
    an error pointing at that override, whose fix rewrites it."""
    from areal_conf.validation import validate_run

    return validate_run(_read(command, cfg, settings))


def _read(command: AReaLCommand, cfg: Any, settings: Settings | None) -> Reading:
    """``read_run(cfg)``, a key AReaL lacks that an override wrote pointed at there. The
    config is a whole AReaL config: a value AReaL's loader requires may not be missing."""
    from areal_conf.config.required_values import required_error
    from areal_conf.validation import read_run

    try:
        settings = with_driver_scope(command, settings)
        _check_top_level(command, cfg, settings)
        reading = read_run(cfg, settings=settings)
        if reading.run.missing_values:
            raise required_error(reading.run.missing_values)
        return reading
    except ErrorAtKey as err:
        override = err.given_by(command.overrides)
        if override is None:
            raise
        fixed = err.for_override(override)
        n = command.overrides.index(override)
        raise _about_override(
            command, _override_index(command, override, n), override, fixed.reason, fixed.hint
        ) from None


def with_driver_scope(command: AReaLCommand, settings: Settings | None) -> Settings | None:
    """``settings`` (the environment's when None) with the scope of the command's driver
    script, when its source shows it builds no AReaL trainer; else ``settings``."""
    from areal_conf.areal.drivers import driver_scope
    from areal_conf.settings import default_settings

    if command.form != "script":
        return settings
    scope = driver_scope(Path(command.cwd, command.driver), command.driver)
    if scope is None:
        return settings
    return replace(settings if settings is not None else default_settings(), driver=scope)


def _check_top_level(command: AReaLCommand, cfg: Any, settings: Settings | None) -> None:
    """The top-level keys of ``cfg`` against the config class the command's driver script
    loads it into, when its source says which (a config read alone leaves them unchecked:
    a driver's class may add any)."""
    from areal_conf.areal.versions import choose_rules
    from areal_conf.command.driver_class import check_top_level_keys, driver_config_class
    from areal_conf.config.known_keys import areal_keys

    if command.form != "script":
        return
    version = choose_rules(settings.areal_version if settings is not None else None).version
    script = Path(command.cwd, command.driver)
    driver = driver_config_class(script, areal_keys(version).experiments)
    if driver is not None:
        check_top_level_keys(cfg, driver, version)


def config_file(command: AReaLCommand) -> Any:
    """The ``--config`` file, checked as AReaL's loader needs it: it exists, and its name
    ends in ``.yaml`` (the loader asks Hydra for the name up to ``.yaml``; Hydra finds
    nothing for ``x.yml``)."""
    path = command.config_path
    index = _config_index(command)
    if not path.is_file():
        what = "a directory, not a file" if path.is_dir() else "no such file"
        raise command_error(
            command.argv,
            index,
            f"--config {command.config}: {what}",
            "give the experiment YAML the AReaL command loads (a path relative to the "
            "directory the command runs in), e.g. --config examples/math/gsm8k_grpo.yaml",
        )
    if not path.name.endswith(AREAL_CONFIG_SUFFIX):
        raise command_error(
            command.argv,
            index,
            f"--config {command.config}: AReaL's loader reads only .yaml files (it asks "
            f"Hydra for the name before '.yaml', and Hydra finds no config {path.name!r})",
            f"rename the file to {path.stem}.yaml",
        )
    return path


def parse_overrides(command: AReaLCommand, overrides: Sequence[str]) -> list[Any]:
    """Each override parsed with Hydra's own parser; one that does not parse is an
    error pointing at it (in the command when it is one of the command's)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed = []
    for n, override in enumerate(overrides):
        try:
            parsed.append(parser.parse_override(override))
        except HydraException as err:  # OverrideParseException, or its cause alone
            index = _override_index(command, override, n)
            reason = str(err).split("\n")
            detail = next((line for line in reason if line and "Error parsing" not in line), "")
            raise _about_override(
                command,
                index,
                override,
                f"Hydra cannot parse the override {override!r}: {detail.strip()}",
                _quoting_hint(override),
            ) from None
    return parsed


def refuse_sweeps(command: AReaLCommand) -> None:
    """``check`` and ``run`` take one training run: an override with several values
    (``a=1,2``, ``range()``, ``choice()``) is a sweep."""
    for n, parsed in enumerate(parse_overrides(command, command.overrides)):
        if parsed.is_sweep_override():
            index = command.override_indices[n]
            raise command_error(
                command.argv,
                index,
                f"{command.overrides[n]!r} gives several values: that is a sweep, and this "
                "verb starts one run",
                "sweep it with python -m areal_conf sweep <the same command> (add --dry-run "
                "to see every job and its plan first), or give one value",
            )


def _config_index(command: AReaLCommand) -> int | None:
    for i, arg in enumerate(command.argv):
        if arg == command.config or arg.endswith("=" + command.config):
            return i
    return None


def _override_index(command: AReaLCommand, override: str, n: int) -> int | None:
    if command.overrides[n : n + 1] == (override,):
        return command.override_indices[n]
    return None


def _about_override(
    command: AReaLCommand, index: int | None, override: str, reason: str, hint: str
) -> AllocationError:
    if index is not None:
        return command_error(command.argv, index, reason, hint)
    return AllocationError(reason, override, None, hint=hint)


def _quoting_hint(override: str) -> str:
    key, eq, value = override.partition("=")
    if eq and any(ch in value for ch in "()|[]{},"):
        try:
            fixed = format_overrides([f"{key}={value}"])
        except AllocationError:
            fixed = ""
        if fixed and fixed != override:
            return (
                f"quote the value for Hydra and for the shell: {fixed}; or use the YAML "
                "for values with special characters"
            )
    return (
        "write key=value to change a key, +key=value to add one, ~key to delete one; "
        "AReaL passes every argument other than --config to Hydra as an override"
    )

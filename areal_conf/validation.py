"""``validate(cfg)``: the one check that train.py, the launcher and the command line run.

Takes a composed config (an OmegaConf DictConfig or any nested mapping) and returns a
``Plan`` or raises one ``AllocationError`` whose first line names the config key.

The config is read once (:func:`areal_conf.config.reading.read_config`), under the rules of one
AReaL version (:func:`areal_conf.areal.versions.choose_rules`); then the rules of that
version (:data:`areal_conf.rules.registry.RULES`) run in order, and the first that fails
is the message. :func:`read_run` and :func:`validate_run` are the two halves, for a
caller that checks one config with several edits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from areal_conf.areal.versions import RulesChoice, choose_rules, supported_version
from areal_conf.arguments import strings, text
from areal_conf.config.edits import edited_run, with_overrides
from areal_conf.config.reading import read_allocation_mode, read_config
from areal_conf.config.run_config import EngineSection, RunConfig
from areal_conf.config.run_reading import Reading
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import either, fix, sentence
from areal_conf.model.shape import ModelShape, model_shape
from areal_conf.plan.plan import Plan
from areal_conf.rules.context import Context, gpu_memory, pasteable_error
from areal_conf.rules.engines import parse_engines
from areal_conf.rules.fit import Outcome, Recheck
from areal_conf.rules.fixes import FixCheck, check_hint
from areal_conf.rules.registry import LAST_REFUSING, Rule, rules_for
from areal_conf.settings import Settings, default_settings, optional_settings
from areal_conf.spec.model_checks import validate_model

if TYPE_CHECKING:
    from areal_conf.perf.rl_step import Calibration, RLStep


@dataclass(frozen=True)
class Validation(Plan):
    """What :func:`validate` found: the plan, and what it read to find it, for a caller
    that goes on (the layouts of an engine, the fastest split) without reading the config
    again. ``run`` is the config as read (an edited one's, for :func:`validate_run` with
    edits), ``settings`` areal-conf's knobs it was checked with, ``shape`` the model's
    shape, or why it is unknown."""

    run: RunConfig | None = None
    settings: Settings | None = None
    shape: ModelShape | str | None = None

    def plan_only(self) -> Plan:
        """The plan without what was read, for a caller that keeps many (a sweep's
        thousands of jobs: what was read is many small objects each); it predicts no RL
        step."""
        kept = {f.name: getattr(self, f.name) for f in fields(Plan)}
        return Plan(**{**kept, "rl_inputs": None})


def validate(
    cfg: Any, *, areal_version: str | None = None, settings: Settings | None = None
) -> Validation:
    """Check a composed config and return its allocation plan: a :class:`Validation`,
    the plan with the config as read, the settings and the model's shape.

    ``areal_version`` (``"1.0"``, ``"2.0"``) chooses AReaL's rules, as ``--areal-version``
    does (so does ``settings.areal_version``; given both, they must agree); otherwise
    ``AREAL_CONF_AREAL_VERSION``, the installed ``areal`` or the newest supported version
    decide. ``settings`` are areal-conf's other knobs (a GPU's memory,
    the model's shape); by default they come from the environment
    (``AREAL_CONF_GPU_MEMORY_GB``, ``AREAL_CONF_GPU``, ``AREAL_CONF_MODEL``), or from the
    command line of ``python -m areal_conf sweep`` while it runs.
    """
    return validate_run(read_run(cfg, areal_version=areal_version, settings=settings))


def rl_throughput(
    cfg: Any,
    *,
    areal_version: str | None = None,
    settings: Settings | None = None,
    calibration: Calibration | None = None,
) -> RLStep:
    """The predicted RL step of a composed AReaL config, checked first as :func:`validate`
    checks it (same arguments): its phases (``generate``, ``train``, ``ref_logp``,
    ``recompute_logp``, ``update_weights``, ...), how they overlap (asynchronous,
    synchronous or colocated, as AReaL's trainer runs the config), the step's seconds,
    the trained tokens a second and what was assumed. ``calibration`` scales the phases
    by what a run measured (``python -m areal_conf tune``). An AllocationError when the
    config does not pass, or its step cannot be predicted (no model shape, no batch size,
    not an RL config)."""
    return rl_step_of(
        validate(cfg, areal_version=areal_version, settings=settings), calibration=calibration
    )


def rl_step_of(checked: Validation, calibration: Calibration | None = None) -> RLStep:
    """:func:`rl_throughput` of a config already checked."""
    from areal_conf.perf.rl_step import rl_step
    from areal_conf.perf.speed import gpu_for_speed

    if checked.cpu_run:
        raise ConfigError(
            "a run without GPUs (cluster.n_gpus_per_node: 0) has no step time to predict",
            hint="give the GPUs it will run on, e.g. cluster.n_gpus_per_node=8",
        )
    if not isinstance(checked.shape, ModelShape):
        raise ConfigError(
            f"no RL step to predict: the model's shape is unknown ({checked.shape})",
            hint="give it as the settings' model, e.g. Settings(model={'hf_config': "
            "'Qwen/Qwen3-8B'}) (or AREAL_CONF_MODEL)",
        )
    assert checked.run is not None and checked.settings is not None  # validate gives them
    gpu, _ = gpu_for_speed(checked.settings.gpu)
    return rl_step(
        checked.run,
        checked.rl_engines(),
        checked.shape,
        gpu=gpu,
        n_gpus_per_node=checked.n_gpus_per_node,
        mean_response_tokens=checked.settings.mean_response_tokens,
        calibration=calibration,
    )


def read_run(
    cfg: Any, *, areal_version: str | None = None, settings: Settings | None = None
) -> Reading:
    """The first half of :func:`validate` (same arguments): the settings in force, the
    AReaL rules chosen and the config read once; an AllocationError when it cannot be
    read, or sets the deprecated ``allocation_mode``. :func:`validate_run` checks it."""
    if areal_version is not None:
        text("areal_version", areal_version, example='e.g. "2.0", or None')
    settings = optional_settings(settings)
    if settings is None:
        settings = default_settings(areal_version=areal_version)
    elif areal_version is not None and settings.areal_version is not None:
        _one_version(areal_version, settings.areal_version)
    choice = choose_rules(areal_version or settings.areal_version)
    legacy = read_allocation_mode(cfg) if isinstance(cfg, Mapping) else ""
    if legacy not in (None, ""):
        try:  # to say whether the engines' own backends agree with it (it comes first)
            run: RunConfig | None = read_config(cfg, choice.rules, keys=False)
        except AllocationError:
            run = None
        try:
            engines = run.engines if run is not None else None
            check_allocation_mode(legacy, choice.rules.teacher_layout, engines)
        except AllocationError as err:
            if run is None:
                raise
            check = _whole_check(cfg, choice, settings)
            raise _checked(pasteable_error(err, run), check) from None
    return _read(cfg, choice, settings)


def _read(cfg: Any, choice: RulesChoice, settings: Settings) -> Reading:
    """``cfg`` read under ``choice``'s rules; a read error with its fixes checked."""
    try:
        run = _read_config(cfg, choice, settings)
    except AllocationError as err:
        raise _checked(err, _whole_check(cfg, choice, settings)) from None
    return Reading(cfg, run, choice, settings)


def _read_config(cfg: Any, choice: RulesChoice, settings: Settings) -> RunConfig:
    """``cfg`` read under ``choice``'s rules, for the driver ``settings`` name."""
    run = read_config(cfg, choice.rules)
    return run if settings.driver is None else replace(run, driver=settings.driver)


def validate_run(
    reading: Reading, edits: Sequence[str] = (), *, check_fixes: bool = True
) -> Validation:
    """Check a config read by :func:`read_run`, with the overrides ``edits`` applied
    (``actor.backend=megatron:d2t4``, as Hydra's ``++`` applies them): the same plan, or
    the same AllocationError, as :func:`validate` of the edited config. An edit of an
    engine's backend is made on the config as read, unless a value read may depend on it;
    any other edit reads the edited config again. ``check_fixes=False`` raises the same
    error without trying the fixes of its hint on the whole config: for a caller that
    only asks whether the config passes (a sweep's layouts), many times faster when it
    does not."""
    if not isinstance(reading, Reading):
        raise ConfigError(
            f"validate_run needs the reading of a config, got {type(reading).__name__}",
            hint="read the config first: validate_run(read_run(cfg), edits)",
        )
    edits = tuple(strings("edits", edits, example='e.g. ["actor.backend=fsdp:d4t2"]'))
    if edits:
        run = edited_run(reading.run, edits)
        if run is None:
            reading = _read(_edited(reading.config, edits), reading.choice, reading.settings)
        else:
            reading = reading.with_backends(run, edits)
    ctx = Context(reading)
    if check_fixes:
        ctx.recheck = _rechecker(ctx)
    failed = _run_checks(ctx)
    if failed is not None:
        error = failed[1]
        if not check_fixes:
            raise pasteable_error(error, reading.run) from None
        check = _whole_check(reading, reading.choice, reading.settings)
        raise _checked(pasteable_error(error, reading.run), check) from None
    plan = ctx.plan()
    return Validation(
        **{f.name: getattr(plan, f.name) for f in fields(plan)},
        run=reading.run,
        settings=reading.settings,
        shape=model_shape(ctx.model),
    )


def _one_version(argument: str, in_settings: str) -> None:
    """``validate``'s ``areal_version`` and ``settings.areal_version``, both given, name
    the same AReaL version; else an AllocationError (neither silently wins)."""
    given = supported_version(argument, where="areal_version")
    if given != supported_version(in_settings, where="settings.areal_version"):
        raise ConfigError(
            f"areal_version={argument!r} and settings.areal_version={in_settings!r} name "
            "different AReaL versions",
            hint=f"give the version once, e.g. areal_version={given!r} with settings whose "
            "areal_version is None",
        )


def _checked(error: AllocationError, check: FixCheck) -> AllocationError:
    """``error`` with each fix of its hint checked by the whole check
    (:func:`areal_conf.rules.fixes.check_hint`), and the fixes that pass as data
    (``error.fixes``)."""
    checked = check_hint(error.advice, check)
    if checked.hint is None:
        return error
    return error.with_hint(checked.hint).with_fixes(checked.fixes)


def _run_checks(ctx: Context, *, until: str = "") -> tuple[Rule, AllocationError] | None:
    """Run the rules of the version in order (up to the one with id ``until``, when
    given); the first that fails and its error (which carries the rule's id), or None."""
    for rule in rules_for(ctx.choice.version):
        if not rule.applies(ctx):
            continue
        ctx.rule = rule.id
        try:
            rule.run(ctx)
        except AllocationError as err:
            return rule, err if err.rule else err.with_rule(rule.id)
        if rule.id == until:
            break
    return None


def _edited(cfg: Any, edits: tuple[str, ...]) -> Any:
    """``cfg`` with ``edits`` applied, or an AllocationError naming the one it cannot take
    (a key under a value that is not a section)."""
    try:
        return with_overrides(cfg, edits)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        raise ConfigError(
            f"edits: {' '.join(edits)} cannot be applied to this config: "
            + str(err).partition("\n")[0],
            hint="give key=value for a key whose parents are sections, e.g. "
            "actor.backend=fsdp:d4t2",
        ) from None


def _rechecker(outer: Context) -> Recheck:
    """The whole check again (up to the last rule that can refuse), on the
    config of ``outer`` with a fix's overrides, for the memory check of ``outer`` to print
    only the fixes that pass it. The GPU's memory is the one the fix was made for, given:
    what does not fit is an error there even when ``outer`` only warns.

    A recheck that fails because another group of engines does not fit takes that
    group's own fix (found by the same means) as part of this one; when that group has
    none, no other fix of this group can pass either.
    """

    def recheck(owner: str, overrides: tuple[str, ...]) -> Outcome:
        gb, source, _ = gpu_memory(outer)
        settings = replace(outer.settings, gpu_memory_gb=gb, gpu_memory_from=source)
        fixing = (*outer.fixing, owner)
        reading = outer.reading
        try:
            ctx, failed = _check_edited(reading, overrides, reading.choice, settings, fixing)
        except AllocationError as err:
            return Outcome(False, reason=err.reason)
        if failed is None:
            return Outcome(True)
        check, error = failed
        memory = ctx.memory
        if check.id == "memory" and memory is not None and memory.owner not in ctx.fixing:
            if memory.fix:
                return Outcome(True, more=memory.fix)
            return Outcome(False, reason=error.reason, final=True)
        return Outcome(False, reason=error.reason)

    return recheck


def _check_edited(
    source: Reading | Any,
    overrides: tuple[str, ...],
    choice: RulesChoice,
    settings: Settings,
    fixing: tuple[str, ...] = (),
) -> tuple[Context, tuple[Rule, AllocationError] | None]:
    """The whole check (up to the last rule that can refuse) of a config with
    ``overrides`` applied, under ``choice``'s rules; its context and what failed, if
    anything. ``source`` is the config's reading, or the config itself when it could not
    be read. Raises AllocationError when the edited config cannot be read.

    A fix that only sets engines' backends is made on the config as read, as
    :func:`validate_run` makes a sweep's layouts: a memory fix's check then neither
    copies the config nor reads it again."""
    reading = source if isinstance(source, Reading) else None
    run = edited_run(reading.run, overrides) if reading is not None else None
    if reading is not None and run is not None:
        edited_reading = replace(reading.with_backends(run, overrides), settings=settings)
    else:
        edited = with_overrides(reading.config if reading is not None else source, overrides)
        edited_reading = Reading(edited, _read_config(edited, choice, settings), choice, settings)
    ctx = Context(edited_reading, fixing=fixing)
    ctx.recheck = _rechecker(ctx)
    return ctx, _run_checks(ctx, until=LAST_REFUSING)


def _whole_check(source: Reading | Any, choice: RulesChoice, settings: Settings) -> FixCheck:
    """For :func:`areal_conf.rules.fixes.check_hint`: the error the whole check gives a
    config (``source``: its reading, or the config when it could not be read) with a
    fix's overrides (its hint spelled for that config), or None when it passes."""

    def check(overrides: tuple[str, ...]) -> AllocationError | None:
        try:
            ctx, failed = _check_edited(source, overrides, choice, settings)
        except AllocationError as err:
            return err
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            # an override the config cannot take (a key under a value that is no section)
            return AllocationError(f"the override cannot be applied: {err}")
        if failed is None:
            return None
        error = failed[1]
        return pasteable_error(error, ctx.run)

    return check


def check_allocation_mode(
    value: object,
    teacher_layout: str = "nested",
    engines: Mapping[str, EngineSection] | None = None,
) -> None:
    """Reject the deprecated top-level allocation_mode, quoting its translation; with the
    config's ``engines``, say whether their own backends already say the same."""
    if value is None or value == "":
        return
    if not isinstance(value, str):
        raise AllocationError(
            "allocation_mode: the deprecated allocation_mode is set",
            value,
            hint=sentence(
                "remove it and set each engine's backend, e.g. ",
                fix("rollout.backend=sglang:d4t2", "actor.backend=fsdp:d8"),
            ),
        )
    from areal_conf.spec.legacy import migrate_allocation_mode

    try:
        translation = migrate_allocation_mode(value, teacher_layout=teacher_layout)
    except AllocationError as err:
        raise AllocationError(
            "allocation_mode is deprecated, and this value cannot be translated: " + err.reason,
            value,
            err.position,
            length=err.length,
            hint=sentence(
                "set each engine's backend instead, e.g. ",
                fix("rollout.backend=sglang:d4t2", "actor.backend=fsdp:d8"),
            ),
        ) from None
    agreement = _agreement(value, engines) if engines else None
    if agreement is not None and agreement[0]:
        hint = either(
            fix(
                "~allocation_mode",
                lead=f"the engines' own backends already say the same ({agreement[1]}): "
                "removing allocation_mode is the whole fix: ",
            )
        )
    else:
        hint = either(
            fix(
                "~allocation_mode",
                *translation,
                lead="remove allocation_mode and use these overrides instead: ",
                remark=f"  (or run: python -m areal_conf migrate --yaml '{value}' for the YAML)",
                quoted=True,
            )
        )
        if agreement is not None:
            hint = either(agreement[1], "; ", *hint.options)
    raise AllocationError(
        "allocation_mode is deprecated: each engine has its own backend field now",
        value,
        hint=hint,
    )


def _agreement(legacy: str, engines: Mapping[str, EngineSection]) -> tuple[bool, str] | None:
    """Whether every engine of ``legacy`` has that backend in its own section already,
    and a phrase saying so, or naming the first engine that differs."""
    from areal_conf.spec.legacy import migrated_backends
    from areal_conf.spec.parser import parse_backend

    try:
        wanted = migrated_backends(legacy)
    except AllocationError:
        return None
    same: list[str] = []
    for name, backend in wanted.items():
        engine = engines.get(name)
        written = engine.backend if engine is not None else None
        try:
            have = str(parse_backend(written)) if isinstance(written, str) and written else None
        except AllocationError:
            have = None
        key = engine.backend_key if engine is not None else f"{name}.backend"
        if have != backend:
            now = f"is {have}" if have else "is not set"
            return False, f"{key} {now}, but allocation_mode says {backend}"
        same.append(f"{key}={backend}")
    return True, " ".join(same)


def value_error(
    key: str, value: object, *, areal_version: str | None = None
) -> AllocationError | None:
    """The error areal-conf's readers give ``value`` at the dotted config ``key`` when it
    is read on its own (``cluster.n_nodes``: :func:`areal_conf.config.reading.read_cluster`;
    an engine's ``backend``: the parser; ``model.*``: the model checks), or None when
    they take it or name another key. For a value that a typed schema refused before
    areal-conf could read it (``cluster.n_nodes=inf`` on ``areal_schema``): the same
    message and fix the value gets in an AReaL YAML."""
    node: Any = value
    for part in reversed(key.split(".")):
        node = {part: node}
    try:
        run = read_config(node, choose_rules(areal_version).rules, keys=False)
        if run.own_config:
            validate_model(run.model)
        else:
            parse_engines(run, check_kinds=False)
    except AllocationError as err:
        if err.key is None and err.reason.startswith((f"{key}:", f"{key} ")):
            err.key = key
        return err if err.key == key else None
    return None


def checked_fix(
    cfg: Any, error: AllocationError, *, areal_version: str | None = None
) -> AllocationError:
    """``error`` with each fix of its hint checked on ``cfg`` by the whole check (for an
    error found before ``cfg`` was validated: a value refused while it was composed)."""
    settings = default_settings(areal_version=areal_version)
    choice = choose_rules(settings.areal_version or areal_version)
    return _checked(error, _whole_check(cfg, choice, settings))

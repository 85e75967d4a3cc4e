"""Parallelism sweeps: which layouts to try for one engine, and how to write them.

:func:`engine_layouts` reads a composed config (a DictConfig or any nested mapping) and
answers "every valid layout of this engine": the backend, the GPU count and the tp cap
default to what the config says (the engine's current backend and world size, following
the empty-backend fallback, and ``cluster.n_gpus_per_node``), and the ``model`` section filters
them; ``fits`` keeps the layouts whose memory per GPU fits, ``rank="step_time"`` orders
them by predicted seconds of a training step (:mod:`areal_conf.perf.speed`, as the plan's
``s/step`` column) and ``top_k`` keeps the fastest. The ``areal_layouts`` Hydra sweeper
and ``python -m areal_conf layouts`` both call into this module; it imports no Hydra
and parses no command line (the ``layouts`` subcommand's arguments are read in
:mod:`areal_conf.cli`, which calls :func:`fitting_layouts` here).

:func:`areal_conf.overrides.sweep_override` writes a list of values as one Hydra multirun
override, escaped for Hydra's override grammar; :func:`areal_conf.overrides.shell_sweep_override`
adds the shell quoting (the rules are :func:`areal_conf.overrides.format_overrides`'s).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from areal_conf.areal.roles import ROLE, ROLE_NAMES
from areal_conf.areal.versions import choose_rules
from areal_conf.arguments import optional_whole
from areal_conf.config.reading import read_config
from areal_conf.config.run_config import RunConfig
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.perf.memory import MemoryEstimate
from areal_conf.rules.engines import engine_backend
from areal_conf.spec.backends import BACKENDS, INFERENCE_BACKENDS, TRAINING_BACKENDS, join_or
from areal_conf.spec.layouts import layouts
from areal_conf.spec.model_checks import MODEL_KEYS

if TYPE_CHECKING:
    from areal_conf.config.run_reading import Reading

#: The orders the layouts sweeper's ``rank`` takes (None: the layouts' own order).
RANKS: Final = ("step_time",)
_RANKED_BY: Final = "hydra.sweeper.rank=step_time"  # what the errors of a ranking start with


@dataclass(frozen=True)
class EngineSweep:
    """The layouts to sweep for one engine, and where their parameters came from."""

    engine: str
    backend: str
    gpus: int
    max_tp: int | None
    layouts: tuple[str, ...]
    section: str = ""  # where the engine's keys are, when not its name (teacher.rollout)
    #: rank="step_time": each layout's predicted seconds of a training step, in order.
    seconds: tuple[float, ...] = ()
    #: rank="step_time": whether each layout fits (the config passes ``validate``).
    fitting: tuple[bool, ...] = ()
    #: How the step times were predicted (the GPU, the tokens of a step), when ranked.
    speed_note: str = ""
    #: The layouts there were before ``top_k`` kept the first ones (None: all kept).
    total: int | None = None

    @property
    def key(self) -> str:
        """The config key the sweep sets, e.g. ``actor.backend``."""
        return f"{self.section or self.engine}.backend"

    def describe(self) -> str:
        cap = "no tp cap" if self.max_tp is None else f"tp ≤ {self.max_tp}"
        count = str(len(self.layouts))
        if self.total is not None and self.total != len(self.layouts):
            count += f" of {self.total}"
        order = "; fastest predicted step first" if self.seconds else ""
        return (
            f"{count} {self.backend} layout(s) of {self.engine} on {self.gpus} GPUs ({cap}{order})"
        )


def check_engine(engine: object, cfg: Any = None) -> str:
    """``engine`` if it is a role or an engine of ``cfg``, else an AllocationError with a hint."""
    known = list(ROLE_NAMES)
    if cfg is not None:
        run = cfg if isinstance(cfg, RunConfig) else read_config(cfg, choose_rules().rules)
        known += [n for n in run.engines if n not in ROLE]
    if isinstance(engine, str) and engine in known:
        return engine
    shown = engine if isinstance(engine, str) else repr(engine)
    close = difflib.get_close_matches(str(shown).lower(), known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    raise AllocationError(
        f"unknown engine {shown!s}",
        shown,
        hint=hint + "the engines are " + join_or(known),
    )


def swept_keys(engine: object, cfg: Any) -> tuple[str, tuple[str, ...]]:
    """``engine`` checked as :func:`check_engine` checks it, and the keys its backend may
    have in the composed config ``cfg``, which a sweep sets: the config's own
    (``teacher.rollout.backend`` for AReaL 2.0's inference teacher), or, where the config
    has no section of it yet, every key the AReaL version gives it. The config is read once."""
    choice = choose_rules()
    run = read_config(cfg, choice.rules)
    name = check_engine(engine, run)
    section = run.engines.get(name)
    if section is not None:
        return name, (section.backend_key,)
    sections = [row.section for row in choice.rules.rows(name)] or [name]
    return name, tuple(f"{s}.backend" for s in sections)


def check_engine_kind(engine: str, backend: str, kind: str | None = None) -> None:
    """A role runs a backend of its kind (``kind``: the config's, e.g. an inference
    teacher's; default the role's); an extra engine's kind follows from its backend."""
    rule = BACKENDS.get(backend)
    wanted = kind or areal_engine_keys().get(engine)
    if rule is None or wanted is None:
        return  # layouts() names an unknown backend with its hint
    if rule.kind == wanted:
        return
    choices = INFERENCE_BACKENDS if wanted == "inference" else TRAINING_BACKENDS
    others = [r.name for r in ROLE.values() if r.kind == rule.kind and r.name != engine]
    raise AllocationError(
        f"{engine} needs {'an' if wanted == 'inference' else 'a'} {wanted} backend, got {backend}",
        backend,
        0,
        length=len(backend),
        hint=f"use {join_or(list(choices))} for {engine}, or give {backend} to {join_or(others)}",
    )


_ENGINE_NAME: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def areal_engine_keys() -> dict[str, str]:
    """Every config key of an engine section in a supported AReaL version (``actor``,
    ``teacher.train``, ``teacher.rollout``, ...) -> the kind of backend it runs."""
    from areal_conf.areal.versions import VERSIONS

    keys = {role.name: role.kind for role in ROLE.values()}
    for version in VERSIONS.values():
        keys.update((row.section, row.kind) for row in version.engines)
    return keys


def check_engine_name(engine: str, where: str = "--engine") -> None:
    """An engine's name, given without a config, is a role or the key of an engine section
    of AReaL's config (``teacher.train``); anything else is an AllocationError naming
    ``where``: a name that is no config key, a section that holds no engine (``gconfig``),
    or a section only a user's config could define (a driver's ``judge``), which the
    layouts sweeper checks against that config."""
    known = areal_engine_keys()
    if engine in known:
        return
    if _ENGINE_NAME.fullmatch(engine) is None:
        what = "is no config key"
    elif _holds_no_engine(engine.split(".")[0]):
        what = "is a section of AReaL's config that holds no engine"
    else:
        what = "is no engine section of AReaL's config"
    hint = f"name one of {join_or(list(known))}, e.g. {where} actor"
    if what.startswith("is no engine"):
        hint += (
            f"; for an engine section your own config defines, sweep it from the config, "
            f"which knows it: python -m areal_conf sweep -- python DRIVER.py --config "
            f"cfg.yaml hydra/sweeper=areal_layouts hydra.sweeper.engine={engine}"
        )
    raise AllocationError(f"{where}: {engine!r} {what}", engine, None, hint=hint)


def _holds_no_engine(name: str) -> bool:
    """A top-level key of AReaL's config (or areal-conf's) whose section is no engine."""
    from areal_conf.config.known_keys import top_section
    from areal_conf.config.reading import NOT_ENGINES

    if name in ROLE:
        return False
    if name in NOT_ENGINES:
        return True
    section = top_section(choose_rules().version, name, None)
    return section is not None and "backend" not in section.fields


def check_ranking(rank: object, top_k: object) -> None:
    """Nothing when ``rank`` and ``top_k`` are values the layouts sweeper takes (``rank``
    one of :data:`RANKS` or None; ``top_k`` None or, with a ``rank``, a whole number from
    1), else an AllocationError naming the option, the value and the fix."""
    if rank is not None and rank not in RANKS:
        guess = str(rank).strip().lower().replace("-", "_").replace(" ", "_")
        close = difflib.get_close_matches(guess, RANKS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(
            f"hydra.sweeper.rank: unknown ranking {rank!r}",
            hint=hint + "hydra.sweeper.rank=step_time runs the layouts fastest predicted "
            "training step first, hydra.sweeper.rank=null in their own order",
        )
    if top_k is None:
        return
    if type(top_k) is not int or top_k < 1:
        raise ConfigError(
            f"hydra.sweeper.top_k: must be a whole number of layouts from 1, got {top_k!r}",
            hint="e.g. hydra.sweeper.top_k=3 runs the 3 fastest layouts of each combination, "
            "hydra.sweeper.top_k=null all of them",
        )
    if rank is None:
        raise ConfigError(
            f"hydra.sweeper.top_k={top_k} keeps the fastest layouts, but hydra.sweeper.rank "
            "is null: the layouts are not ranked",
            hint="add hydra.sweeper.rank=step_time",
        )


def check_sweep_sizes(max_jobs: object = None, max_batch_size: object = None) -> None:
    """Nothing when ``hydra.sweeper.max_jobs`` and ``hydra.sweeper.max_batch_size`` are
    null or whole numbers from 1 (Hydra's basic sweeper asserts it of the batch size:
    ``BasicSweeper.split_arguments``); else an AllocationError naming the option."""
    optional_whole(
        "hydra.sweeper.max_jobs",
        max_jobs,
        example="e.g. hydra.sweeper.max_jobs=1000, or hydra.sweeper.max_jobs=null for no limit",
    )
    optional_whole(
        "hydra.sweeper.max_batch_size",
        max_batch_size,
        example="e.g. hydra.sweeper.max_batch_size=8 launches the jobs 8 at a time, "
        "hydra.sweeper.max_batch_size=null all in one batch",
    )


def default_engine(backend: str) -> str:
    """The engine a sweep of ``backend`` is usually for: the first role of its kind
    (rollout for inference backends, actor for training ones)."""
    rule = BACKENDS.get(backend)
    kind = rule.kind if rule is not None else "training"
    return next(r.name for r in ROLE.values() if r.kind == kind)


def engine_layouts(
    cfg: Any,
    engine: str = "actor",
    *,
    backend: str | None = None,
    gpus: int | None = None,
    max_tp: int | None = None,
    fits: bool = False,
    rank: str | None = None,
    top_k: int | None = None,
) -> EngineSweep:
    """Every valid layout of ``engine`` for a composed config.

    With ``fits``, only the layouts whose memory per GPU fits ``cluster.gpu_memory_gb``
    are kept, smallest first (the layouts with which the config passes ``validate``,
    colocated engines included). ``rank="step_time"`` orders them by predicted seconds
    of a training step (:func:`areal_conf.perf.speed.training_step`, on the settings' GPU),
    fastest first: the layouts that fit first, then, without ``fits``, those that do
    not; it needs the model's shape and ``train_dataset.batch_size``. ``top_k`` keeps
    the first ``top_k`` (it needs ``rank``; see :func:`check_ranking`).
    ``backend`` defaults to the engine's current backend name, ``gpus`` to its current
    world size (both following the empty-backend fallback), ``max_tp`` to
    ``cluster.n_gpus_per_node``; the ``model`` section filters the layouts.
    Raises AllocationError, its first line naming the config key or sweeper field at
    fault, when a default cannot be derived or no layout is valid.
    """
    from areal_conf.spec.parser import parse_backend
    from areal_conf.validation import read_run

    check_ranking(rank, top_k)
    reading = read_run(cfg)
    run = reading.run
    engine = check_engine(engine, run)
    if backend is None or gpus is None:
        section = run.engines.get(engine)
        if section is None:
            raise ConfigError(
                f"{engine}: the config has no {engine} section, so there is no current "
                "backend or world size to sweep",
                hint="give both, e.g. hydra.sweeper.backend=megatron hydra.sweeper.gpus=16",
            )
        spec, where = engine_backend(run, section)
        if spec is None:
            raise ConfigError(
                f"{where}: {engine} is disabled (empty backend), so there is no current "
                "backend or world size to sweep",
                hint="give both, e.g. hydra.sweeper.backend=megatron hydra.sweeper.gpus=16",
            )
        if spec == "":
            raise ConfigError(
                f"{where}: {engine} has no backend, so there is no current backend or "
                "world size to sweep",
                hint=f"set {engine}.backend, or give hydra.sweeper.backend and hydra.sweeper.gpus",
            )
        try:
            current = parse_backend(spec)
        except AllocationError as err:
            raise err.with_context(where) from None
        backend = current.backend if backend is None else backend
        gpus = current.world_size if gpus is None else gpus
    if max_tp is None:
        max_tp = run.cluster.n_gpus_per_node
    row = run.engines[engine].row if engine in run.engines else None
    check_engine_kind(engine, backend, row.kind if row is not None else None)
    model = reading.model.keys
    key = run.engines[engine].backend_key if engine in run.engines else f"{engine}.backend"
    try:
        found = layouts(backend, gpus, model=model, max_tp=max_tp)
    except AllocationError as err:
        raise err.with_context(f"sweep of {engine}.backend") from None
    if not found:
        raise ConfigError(
            f"no valid {backend} layout of {engine} on {gpus} GPUs "
            f"(tp ≤ {max_tp}, with this model section)",
            hint="sweep another GPU count (hydra.sweeper.gpus), raise hydra.sweeper.max_tp, "
            "or check the model section (" + ", ".join(MODEL_KEYS) + ")",
        )
    seconds: list[float] = []
    fitting: list[bool] = []
    note = ""
    if rank is not None:
        ranked, note = _by_step_time(reading, key, engine, found, model, fits=fits)
        found = [spec for spec, _, _ in ranked]
        seconds = [s for _, s, _ in ranked]
        fitting = [fit for _, _, fit in ranked]
    elif fits:
        found = _fitting(reading, engine, key, found, model)
    if not found:  # only fits drops layouts
        raise ConfigError(
            f"no {backend} layout of {engine} on {gpus} GPUs fits the GPUs' memory "
            "(cluster.gpu_memory_gb) with this config",
            hint=f"sweep more GPUs (hydra.sweeper.gpus), turn on "
            f"{engine}.gradient_checkpointing or lower {engine}.mb_spec.max_tokens_per_mb",
        )
    total = len(found)
    if top_k is not None:
        found, seconds, fitting = found[:top_k], seconds[:top_k], fitting[:top_k]
    section_name = run.engines[engine].section if engine in run.engines else engine
    return EngineSweep(
        engine,
        backend,
        gpus,
        max_tp,
        tuple(found),
        section_name,
        seconds=tuple(seconds),
        fitting=tuple(fitting),
        speed_note=note,
        total=total if top_k is not None else None,
    )


def _fitting(
    reading: Reading, engine: str, key: str, specs: Sequence[str], model: Mapping[str, Any]
) -> list[str]:
    """The layouts with which the config passes ``validate`` when they are its ``key``
    (an engine's backend; so its memory check, colocated engines included), smallest
    memory per GPU of that engine first."""
    from areal_conf.model.shape import model_shape

    shape = model_shape(model)
    if isinstance(shape, str):
        raise ConfigError(
            f"hydra.sweeper.fits: cannot check memory, {shape}",
            hint="set model.hf_config to the model's config.json, or the model's sizes",
        )
    memory = _memory_per_gpu(reading, engine, key, specs)
    order = {spec: i for i, spec in enumerate(specs)}
    return sorted(memory, key=lambda spec: (memory[spec], order[spec]))


def _memory_per_gpu(
    reading: Reading, engine: str, key: str, specs: Sequence[str]
) -> dict[str, float]:
    """The memory per GPU of ``engine``, whose backend is ``key`` (training: the total;
    inference: the weights, so the most KV cache is the least) with each layout with
    which the config passes ``validate``; the layouts it refuses (memory that does not
    fit, alone or with colocated engines) are left out."""
    from areal_conf.validation import validate_run

    memory: dict[str, float] = {}
    for spec in specs:
        try:
            plan = validate_run(reading, [f"{key}={spec}"], check_fixes=False)
        except AllocationError:
            continue
        est = plan.engines[engine].memory
        if est is not None:
            memory[spec] = est.weights if est.kind == "inference" else est.total
    return memory


def _by_step_time(
    reading: Reading,
    key: str,
    engine: str,
    specs: Sequence[str],
    model: Mapping[str, Any],
    *,
    fits: bool,
) -> tuple[list[tuple[str, float, bool]], str]:
    """``specs`` with their predicted seconds of a training step and whether they fit,
    fastest first: those that fit first (see :func:`_fitting`), then those that do not
    (left out with ``fits``); and how the times were predicted. The same prediction as the plan's
    ``s/step`` column: :func:`areal_conf.perf.speed.training_step` of the engine's section,
    the settings' GPU and mean response length, ``cluster.n_gpus_per_node``."""
    from areal_conf.model.shape import model_shape
    from areal_conf.perf.speed import gpu_for_speed, training_step
    from areal_conf.perf.workload import NoWorkload, step_workload

    run, settings = reading.run, reading.settings
    if run.cluster.cpu_run:
        raise ConfigError(
            f"{_RANKED_BY}: cluster.n_gpus_per_node is 0 (a CPU run), so there is no GPU "
            "step time to predict",
            hint="drop hydra.sweeper.rank and hydra.sweeper.top_k, or sweep on GPUs",
        )
    section = run.engines.get(engine)
    step = (
        training_step(run, section, settings.mean_response_tokens)
        if section is not None
        else f"the config has no {engine} section"
    )
    if isinstance(step, str) and (section is None or not section.trainable):
        raise ConfigError(
            f"{_RANKED_BY}: cannot predict {engine}'s step time: {step}",
            hint="rank the layouts of an engine that trains (actor, critic), or drop "
            "hydra.sweeper.rank and hydra.sweeper.top_k",
        )
    shape = model_shape(model, "")
    missing: list[str] = []
    fixes: list[str] = []
    if isinstance(shape, str):
        missing.append(shape.removesuffix(": "))
        fixes.append(
            "the model's shape with model.hf_config=<its config.json, directory or Hugging "
            "Face id> (or the model section's sizes, or AREAL_CONF_MODEL=<the same>)"
            if run.own_config
            else "the model's shape with AREAL_CONF_MODEL=<its config.json, directory or "
            "Hugging Face id>"
        )
    if isinstance(step, str):
        missing.append(step)
        work = step_workload(run, settings.mean_response_tokens)
        if isinstance(work, NoWorkload):
            fixes.append(work.fix)
    if missing:
        raise ConfigError(
            f"{_RANKED_BY}: cannot predict {engine}'s step time: " + " and ".join(missing),
            hint="give " + " and ".join(fixes)
            if fixes
            else "drop hydra.sweeper.rank and hydra.sweeper.top_k",
        )
    assert not isinstance(shape, str) and not isinstance(step, str)
    gpu, said = gpu_for_speed(settings.gpu)
    n_gpus_per_node = run.cluster.n_gpus_per_node
    seconds = [step.predict(spec, shape, gpu, n_gpus_per_node).batch_seconds for spec in specs]
    fitting = _memory_per_gpu(reading, engine, key, specs)
    order = sorted(range(len(specs)), key=lambda i: (specs[i] not in fitting, seconds[i], i))
    if fits:
        order = [i for i in order if specs[i] in fitting]
    return [(specs[i], seconds[i], specs[i] in fitting) for i in order], step.describe(said)


# ------------------------------------------- what ``python -m areal_conf layouts`` uses


def fitting_layouts(
    specs: Sequence[str], model: Mapping[str, Any], knobs: Mapping[str, Any], *, what: str
) -> list[tuple[str, MemoryEstimate]]:
    """The layouts among ``specs`` that fit a GPU, with their estimates, smallest first
    (training: total per GPU; inference: weights per GPU, i.e. most KV cache first)."""
    from areal_conf.model.shape import model_shape
    from areal_conf.perf.memory import estimate

    shape = model_shape(model)
    if isinstance(shape, str):
        raise ConfigError(
            f"{what}: cannot check memory, {shape}",
            hint="give the model's config.json (hf_config=PATH) or its sizes",
        )
    ranked: list[tuple[float, int, str, MemoryEstimate]] = []
    for i, spec in enumerate(specs):
        est = estimate(spec, shape, **knobs)
        if est.fits:
            ranked.append((est.weights if est.kind == "inference" else est.total, i, spec, est))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [(spec, est) for _, _, spec, est in ranked]

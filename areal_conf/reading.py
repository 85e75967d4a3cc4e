"""Read a composed config once, into the typed objects every rule works on.

:func:`read_config` is the one place that reads an AReaL config (an OmegaConf DictConfig
or any nested mapping): the engine sections the AReaL version builds, with the keys
areal-conf's rules read, the cluster, the scheduler, the workload the memory estimate
needs and the ``model`` section of areal-conf's own configs. Every other module works on
the :class:`RunConfig` it returns and never touches the raw config again.

Only the keys listed here are read, one at a time, so a value that only the application
can resolve (an unset ``${oc.env:...}`` in a key areal-conf does not read) does not get
in the way. A key that is absent takes AReaL's default (from the version's table). A
value of the wrong type, or an interpolation that cannot be resolved, is an
AllocationError naming the key; a value of the right type that AReaL would refuse
(``_version: v3``) is read as written and left to the rules.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from areal_conf.areal_versions import AReaLVersion, EngineRow
from areal_conf.errors import AllocationError
from areal_conf.known_keys import check_keys
from areal_conf.roles import (
    ALLOCATION_NODE,
    INHERIT_FROM,
    LEGACY_KEY,
    ROLE,
    TEACHER_LAYOUTS,
    example_backend,
)

#: TeacherConfig's own keys in AReaL 2.0; any other key under ``teacher`` is a 1.0 flat
#: teacher's engine key.
TEACHER_KEYS: Final = (
    "engine_type",
    "rollout",
    "train",
    "path",
    "offload",
    "rl_loss_weight",
    "distill_loss_weight",
)
#: Top-level sections that hold keys, not engines, even when they have a ``backend``.
NOT_ENGINES: Final = frozenset({"cluster", "scheduler", "model", "hydra"})


# --------------------------------------------------------------------- raw access


#: While :func:`read_config` reads a config: the keys of each section it has asked about,
#: by ``id`` (the config, and so every section, lives as long as the read). Most keys the
#: rules read are absent, and a DictConfig builds its list of keys anew at every ask.
_KEYS_SEEN: ContextVar[dict[int, frozenset[str]] | None] = ContextVar("keys_seen", default=None)
#: While :func:`read_config` reads a config: the full keys it found (``actor.offload``).
_PRESENT: ContextVar[set[str] | None] = ContextVar("present", default=None)


def _has(section: Any, key: str) -> bool:
    seen = _KEYS_SEEN.get()
    if seen is None:
        # keys() rather than `in`: a struct-mode DictConfig raises (and formats)
        # internally for every absent key it is asked about.
        return key in section.keys()  # noqa: SIM118
    keys = seen.get(id(section))
    if keys is None:
        keys = seen[id(section)] = frozenset(str(k) for k in section.keys())  # noqa: SIM118
    return key in keys


#: ``${a.b.c}``: an interpolation of another key, which :func:`read_value` follows itself
#: (OmegaConf parses every interpolation with its grammar, the larger part of a read).
_KEY_INTERPOLATION: Final = re.compile(r"\$\{([A-Za-z_]\w*(?:\.\w+)*)\}")
_UNREAD: Final = object()  # a value read_value leaves to OmegaConf


def read_value(section: Any, key: str, where: str, default: Any = None) -> Any:
    """``section[key]`` (resolving an interpolation) or ``default`` when the key is absent;
    a value that cannot be resolved is an AllocationError naming ``where``."""
    if not _has(section, key):
        return default
    present = _PRESENT.get()
    if present is not None:
        present.add(where)
    get_node = getattr(section, "_get_node", None)
    if callable(get_node):
        value = _node_value(get_node(key), 0)
        if value is not _UNREAD:
            return default if value is None and default is not None else value
    try:
        return section.get(key, default)
    except AllocationError:
        raise
    except Exception as err:  # an interpolation only the application can resolve
        get_node = getattr(section, "_get_node", None)
        node = get_node(key) if callable(get_node) else None
        written = node._value() if node is not None and hasattr(node, "_value") else None
        raise unresolvable(where, err, written) from None


def _node_value(node: Any, depth: int) -> Any:
    """What ``get`` returns for an OmegaConf node: the section itself, a plain value, or
    the value a ``${a.b}`` interpolation names, followed here without OmegaConf's grammar;
    ``_UNREAD`` for anything else (a resolver, a relative or missing key, ``???``)."""
    if node is None or depth > 8 or node._is_missing():
        return _UNREAD
    if not node._is_interpolation():
        if node._is_none():
            return None
        if isinstance(node, Mapping | Sequence) and not isinstance(node, str):
            return node
        return node._value()
    written = node._value()
    match = _KEY_INTERPOLATION.fullmatch(written) if isinstance(written, str) else None
    if match is None:
        return _UNREAD
    target: Any = node._get_root()
    for part in match[1].split("."):
        child_node = getattr(target, "_get_node", None)
        if not callable(child_node):
            return _UNREAD
        if isinstance(target, Mapping):
            target = child_node(part) if _has(target, part) else None
        elif isinstance(target, Sequence) and part.isdigit() and int(part) < len(target):
            target = child_node(int(part))
        else:
            return _UNREAD
        if target is None:
            return _UNREAD
    return _node_value(target, depth + 1)


def unresolvable(key: str | None, err: BaseException, written: object = None) -> AllocationError:
    """The error for a config value whose interpolation cannot be resolved (an unset
    environment variable, a missing key): the key, OmegaConf's reason, the text as
    written, and the fix."""
    reason = getattr(err, "msg", None) or str(err) or repr(err)
    # "KeyError raised while resolving interpolation: \"Environment variable ...\""
    reason = reason.split("\n")[0].split(" raised while resolving interpolation: ")[-1].strip('"')
    missing = type(err).__name__ == "MissingMandatoryValue"
    if missing:
        reason = "the value is missing (???)"
    example = f"{key}=<value>" if key else "<key>=<value>"
    if key and key.endswith(".backend"):
        example = f"{key}={example_backend(key.split('.')[0])}"
    hint = (
        f"give it a value, e.g. {example}"
        if missing
        else "fix the interpolation (the referenced key or environment variable) or write "
        f"the value itself, e.g. {example}"
    )
    where = f"{key}: " if key else "a value of the config cannot be resolved: "
    error = AllocationError(where + reason, written, None, hint=hint)
    error.key = key
    return error


def is_yaml_error(err: BaseException) -> bool:
    """True for PyYAML's error about a file that does not parse (recognised by its class,
    so that nothing here imports PyYAML)."""
    return any(
        cls.__module__ == "yaml.error" and cls.__name__ == "YAMLError" for cls in type(err).__mro__
    )


def file_shown(name: str) -> str:
    """A file's name as messages show it: relative to the working directory when it is
    below it (as the user wrote it, most of the time), else as given."""
    if os.path.isabs(name) and not os.path.relpath(name).startswith(".."):
        return os.path.relpath(name)
    return name


def unparsable_yaml(
    err: BaseException, path: object = None, shown: str | None = None
) -> AllocationError:
    """The error for a YAML file that does not parse (PyYAML's error, read by its
    attributes): the file (called ``shown`` when it is ``path``), the line and column,
    PyYAML's reason."""
    mark = getattr(err, "problem_mark", None)
    name = str(getattr(mark, "name", None) or path or "a YAML file")
    if (
        shown is not None
        and path is not None
        and os.path.realpath(name) == os.path.realpath(str(path))
    ):
        name = shown
    else:
        name = file_shown(name)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).split("\n")[0]
    context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and start is not None:  # where the unfinished part began
        problem += f" ({context} at line {start.line + 1}, column {start.column + 1})"
    return AllocationError(
        f"cannot read {name}{where}: the YAML does not parse: {problem}",
        hint="fix the YAML there; Hydra, and so AReaL, cannot load the file as it is",
    )


def is_mapping(value: Any) -> bool:
    is_missing = getattr(value, "_is_missing", None)  # an OmegaConf section left as ???
    missing = callable(is_missing) and bool(is_missing())
    return isinstance(value, Mapping) and not is_null(value) and not missing


def is_null(value: Any) -> bool:
    is_none = getattr(value, "_is_none", None)
    return value is None or (callable(is_none) and bool(is_none()))


def is_unset_section(node: Any) -> bool:
    """True for an engine section that a schema holds but the config never set: a config
    node of a dataclass marked ``schema_section`` (the engine sections of
    ``areal_schema``) whose values, as written, are still that dataclass's defaults. It is
    no engine, as an absent section (OmegaConf cannot type a section that is absent)."""
    kind = getattr(getattr(node, "_metadata", None), "object_type", None)
    if not getattr(kind, "schema_section", False) or is_null(node) or node._is_missing():
        return False
    assert isinstance(kind, type)
    return bool(_as_written(node) == _defaults_of(kind))


@functools.cache
def _defaults_of(kind: type) -> Any:
    return dataclasses.asdict(kind())


def _as_written(node: Any) -> Any:
    """A config node's values as written (interpolations unresolved), as plain data."""
    if is_null(node):
        return None
    child = getattr(node, "_get_node", None)
    if isinstance(node, Mapping) and callable(child):
        return {str(k): _as_written(child(k)) for k in node}
    if isinstance(node, Sequence) and not isinstance(node, str) and callable(child):
        return [_as_written(child(i)) for i in range(len(node))]
    return node._value() if hasattr(node, "_value") else node


def is_absent(value: Any) -> bool:
    """A role section that is no engine: null, or left as the schema gives it."""
    return is_null(value) or is_unset_section(value)


def _given(value: Any) -> bool:
    return is_mapping(value) and not is_unset_section(value)


def _node(cfg: Any, path: str) -> Any:
    """The section at a dotted ``path`` (None when a part is absent or not a section)."""
    node = cfg
    for part in path.split("."):
        if not is_mapping(node):
            return None
        node = read_value(node, part, path)
    return node if is_mapping(node) else None


#: The strings OmegaConf (so AReaL's typed loader) reads as a bool.
_BOOL_TEXT: Final = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


def _bool(section: Any, key: str, where: str, default: bool) -> bool:
    value = read_value(section, key, where, None)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in _BOOL_TEXT:
        return _BOOL_TEXT[value.lower()]
    if not isinstance(value, bool):
        raise AllocationError(
            f"{where}: must be true or false, got {value!r}",
            None,
            None,
            hint=f"e.g. {where}={str(not default).lower()}",
        )
    return value


def _int(
    section: Any, key: str, where: str, default: int | None, example: int, least: int = 1
) -> int | None:
    """A whole number from ``least`` (None: absent, then ``default``)."""
    value = read_value(section, key, where, None)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and value.isascii():
        value = int(value)  # as AReaL's typed loader converts it
    if type(value) is not int or value < least:
        raise AllocationError(
            f"{where}: must be a whole number from {least}, got {value!r}",
            None,
            None,
            hint=f"e.g. {where}={example}",
        )
    return value


def _number(
    section: Any, key: str, where: str, *, least: float = -math.inf, most: float = math.inf
) -> int | float | None:
    """A number from ``least`` to ``most`` as written (an int stays an int, so messages
    quote it as written); NaN and infinities are no numbers here. (``actor.kl_ctl`` has
    no bound: AReaL reads a negative one as no KL penalty, rl_trainer.py:205.)"""
    value = read_value(section, key, where, None)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not least <= value <= most
        or not math.isfinite(value)
    ):
        bounds = (f" from {least:g}" if least > -math.inf else "") + (
            f" to {most:g}" if most < math.inf else ""
        )
        raise AllocationError(
            f"{where}: must be a number{bounds}, got {value!r}",
            None,
            None,
            hint=f"e.g. {where}=0.0 (no ref model) or {where}=0.1"
            if key == "kl_ctl"
            else f"e.g. {where}=0.9",
        )
    return value


def _text(section: Any, key: str, where: str, default: object) -> object:
    """A string key as written (None: absent); the rules check the value."""
    value = read_value(section, key, where, None)
    return default if value is None else value


# ---------------------------------------------------------------------- the objects


@dataclass(frozen=True)
class Strategy:
    """An engine's ``scheduling_strategy`` as AReaL reads it."""

    type: str = "separation"
    target: str | None = None
    fork: bool = True

    @property
    def colocated(self) -> bool:
        return self.type == "colocation"


@dataclass(frozen=True)
class WorkerSpec:
    """One ``scheduling_spec`` entry: the GPUs a worker asks for, and whether it runs
    ``additional_bash_cmds`` (Ray refuses them)."""

    gpu: object = 0
    bash_cmds: bool = False


@dataclass(frozen=True)
class EngineSection:
    """One engine section as written, with AReaL's defaults for absent keys.

    ``name`` is the engine's name in the plan (``teacher``), ``section`` where its keys
    are (``teacher.rollout``). ``specs`` is None when the section has no
    ``scheduling_spec`` key at all. Values of keys the rules check (``controller``,
    ``weight_update_mode``, ...) are as written; their types are checked here.
    """

    name: str
    section: str
    row: EngineRow | None  # None: an extra engine, whose kind follows from its backend
    backend: object  # as written; None when absent
    strategy: Strategy = field(default_factory=Strategy)
    specs: tuple[WorkerSpec, ...] | None = None
    specs_problem: str = ""  # what is wrong with the shape of scheduling_spec
    allocation_written: object = None  # an `allocation` node set to anything but its resolver
    controller: object = "v1"  # _version
    # training engines
    offload: bool = False
    trainable: bool = True  # optimizer is not null
    optimizer_given: bool = False
    is_critic: bool | None = None
    gradient_checkpointing: bool = False
    tokens_per_mb: int | None = None
    attn_impl: str = "flash_attention_2"
    dtype: object = "bfloat16"
    grad_reduce_dtype: str = "float32"
    optimizer_dtype: object = "float32"
    distributed_optimizer: bool = True
    recompute_granularity: str = "full"
    bridge_type: str = "mbridge"  # megatron.bridge_type: which library builds the model
    path: object = None
    # the actor's keys of the RL rules
    kl_ctl: int | float | None = None  # None: absent
    weight_update_mode: object = "xccl"
    weight_update_mode_given: bool = False
    enable_delta_weight_update: bool = False
    weight_update_delta_method: object = "adamw"
    weight_update_anchor_interval: int = 0
    use_lora: bool = False
    ppo_n_minibatches: int = 4
    prox_logp_method: object = "recompute"
    # inference engines
    return_routed_experts: bool = False
    agent_mode: object = "inline"
    max_concurrent_rollouts: int | None = None
    consumer_batch_size: int | None = None
    # The rollout may run this many weight versions ahead: above 0, generation overlaps
    # training (AReaL's asynchronous RL).
    max_head_offpolicyness: int = 0

    def key(self, name: str) -> str:
        """The full config key of one of this engine's keys, e.g. ``teacher.rollout.backend``."""
        return f"{self.section}.{name}"

    @property
    def backend_key(self) -> str:
        return self.key("backend")


@dataclass(frozen=True)
class Teacher:
    """The ``teacher`` section (2.0 layout): which engine it builds, and its own keys.

    ``flat_keys`` are keys of a 1.0 teacher (``backend``, ``mb_spec``, ...) that AReaL
    2.0 no longer accepts directly under ``teacher``.
    """

    engine_type: object = "rollout"
    engine_type_given: bool = False
    has_rollout: bool = False
    has_train: bool = False
    offload: bool = False
    path: object = None  # the teacher's model (it replaces the served model)
    flat_keys: tuple[str, ...] = ()
    flat_backend: object = None
    rollout_backend: object = None  # teacher.rollout.backend, teacher.train.backend
    train_backend: object = None


@dataclass(frozen=True)
class Cluster:
    n_nodes: int = 1
    n_gpus_per_node: int = 8
    gpu_memory_gb: float | None = None  # areal-conf's own configs only

    @property
    def cpu_run(self) -> bool:
        return self.n_gpus_per_node == 0


@dataclass(frozen=True)
class Workload:
    """What the memory estimate reads besides the engines."""

    enable_offload: bool = False
    enable_offload_given: bool = False
    mem_fraction: Mapping[str, float] = field(default_factory=dict)  # per inference backend
    server_dtype: Mapping[str, str] = field(default_factory=dict)
    batch_size: int | None = None
    prompt_len: int = 0
    max_new_tokens: int = 16384
    n_samples: int = 1  # gconfig.n_samples: responses generated per prompt
    max_length: int | None = None  # train_dataset.max_length as written (None: absent)


@dataclass(frozen=True)
class RunConfig:
    """A config as the rules see it: read once, never changed."""

    rules: AReaLVersion
    engines: dict[str, EngineSection]  # present engine sections, by plan name, config order
    teacher: Teacher | None  # the teacher section's own keys (None: absent or null)
    cluster: Cluster
    scheduler_type: object  # scheduler.type as written (None: null or absent)
    scheduler_given: bool
    workload: Workload
    model: Mapping[str, Any]  # the `model` section of areal-conf's configs ({} when none)
    own_config: bool  # areal-conf's own config (it has the `model` section of its schema)
    trainer: Trainer  # the AReaL trainer the config is for (:func:`read_trainer`)
    #: The keys of the config that were read and found (``actor.offload``), so that a fix
    #: can be written as an override Hydra takes: ``key=value`` or ``++key=value``.
    present_keys: frozenset[str] = frozenset()

    @property
    def rl(self) -> bool:
        """PPOTrainer's checks apply: the config has an actor and a rollout."""
        return "actor" in self.engines and "rollout" in self.engines

    @property
    def actor(self) -> EngineSection | None:
        return self.engines.get("actor")

    @property
    def rollout(self) -> EngineSection | None:
        return self.engines.get("rollout")


# ------------------------------------------------------------------------- reading


def read_allocation_mode(cfg: Any) -> object:
    """The deprecated top-level ``allocation_mode`` (``""`` when absent)."""
    return read_value(cfg, LEGACY_KEY, LEGACY_KEY, "")


def config_keys(cfg: Any) -> list[str]:
    try:
        return [str(k) for k in cfg]
    except (AttributeError, TypeError):
        return []


def read_config(cfg: Any, rules: AReaLVersion, *, keys: bool = True) -> RunConfig:
    """Read ``cfg`` (a composed config) under AReaL ``rules``; see the module docstring.
    First every key is checked against AReaL's (:func:`areal_conf.known_keys.check_keys`),
    unless ``keys`` is false (for an error reported before the keys)."""
    token = _KEYS_SEEN.set({})
    present: set[str] = set()
    found = _PRESENT.set(present)
    try:
        return replace(_read_config(cfg, rules, keys), present_keys=frozenset(present))
    finally:
        _KEYS_SEEN.reset(token)
        _PRESENT.reset(found)


def _read_config(cfg: Any, rules: AReaLVersion, keys: bool) -> RunConfig:
    if not isinstance(cfg, Mapping):
        raise AllocationError(
            f"the config must be a mapping of sections, got {type(cfg).__name__}",
            cfg,
            None,
            hint="pass the composed config itself, e.g. validate(cfg) inside @hydra.main",
        )
    if keys:  # before any value is read: a misspelt key is the cause of what follows
        check_keys(cfg, rules.version)
    cluster = read_cluster(cfg)
    scheduler = read_value(cfg, "scheduler", "scheduler")
    if not is_null(scheduler) and not is_mapping(scheduler):
        raise AllocationError(
            f"scheduler: must be a section, got {scheduler!r}",
            None,
            None,
            hint="e.g. scheduler.type=local (one machine), slurm or ray",
        )
    scheduler_type = (
        read_value(scheduler, "type", "scheduler.type") if is_mapping(scheduler) else None
    )
    nested = rules.teacher_layout == "nested"
    teacher = _read_teacher(cfg) if nested or _given(_node(cfg, "teacher")) else None
    engines = dict(_engine_sections(cfg, rules, teacher))
    workload = _read_workload(cfg)
    model_node = read_value(cfg, "model", "model")
    model = (
        {str(k): read_value(model_node, str(k), f"model.{k}") for k in model_node}
        if is_mapping(model_node)
        else {}
    )
    return RunConfig(
        rules=rules,
        engines=engines,
        teacher=teacher,
        cluster=cluster,
        scheduler_type=scheduler_type,
        scheduler_given=is_mapping(scheduler) and _has(scheduler, "type"),
        workload=workload,
        model=model,
        own_config="model" in config_keys(cfg),
        trainer=read_trainer(cfg, engines, teacher),
    )


def read_cluster(cfg: Any) -> Cluster:
    cluster = read_value(cfg, "cluster", "cluster")
    if cluster is None:
        cluster = {}
    if not isinstance(cluster, Mapping):
        raise AllocationError(
            f"cluster: must be a section, got {type(cluster).__name__}",
            cluster,
            None,
            hint="e.g. cluster: {n_nodes: 1, n_gpus_per_node: 8}",
        )
    values = []
    # n_gpus_per_node 0 is AReaL's CPU template.
    for field_name, default, least in (("n_nodes", 1, 1), ("n_gpus_per_node", 8, 0)):
        value = read_value(cluster, field_name, f"cluster.{field_name}", default)
        if type(value) is not int or value < least:
            what = "a positive whole number" if least else "a whole number, 0 for a CPU run"
            raise AllocationError(
                f"cluster.{field_name}: must be {what}, got {value!r}",
                value,
                None,
                hint=f"e.g. cluster.{field_name}={default}",
            )
        values.append(value)
    gb = read_value(cluster, "gpu_memory_gb", "cluster.gpu_memory_gb")
    if gb is not None and (
        isinstance(gb, bool) or not isinstance(gb, int | float) or not 0 < gb < float("inf")
    ):
        raise AllocationError(
            f"cluster.gpu_memory_gb: must be a positive number of GB (10^9 bytes), got {gb!r}",
            gb,
            None,
            hint="e.g. cluster.gpu_memory_gb=80 for an 80 GB GPU",
        )
    from areal_conf.plan import check_cluster_size

    check_cluster_size(values[0], values[1])
    return Cluster(values[0], values[1], None if gb is None else float(gb))


def _read_teacher(cfg: Any) -> Teacher | None:
    node = read_value(cfg, "teacher", "teacher")
    if is_absent(node):
        return None
    if not isinstance(node, Mapping):
        raise AllocationError(
            f"teacher: the teacher must be a section, got {node!r}",
            None,
            None,
            hint="e.g. teacher.rollout.backend=sglang:d1t4 (an inference teacher), or remove "
            "teacher",
        )
    keys = config_keys(node)
    flat = tuple(k for k in keys if k not in TEACHER_KEYS)
    layouts = {
        layout: read_value(sub, "backend", f"teacher.{layout}.backend")
        for layout in TEACHER_LAYOUTS
        if _given(sub := read_value(node, layout, f"teacher.{layout}"))
    }
    return Teacher(
        engine_type=_text(node, "engine_type", "teacher.engine_type", "rollout"),
        engine_type_given=read_value(node, "engine_type", "teacher.engine_type") is not None,
        has_rollout=_given(read_value(node, "rollout", "teacher.rollout")),
        has_train=_given(read_value(node, "train", "teacher.train")),
        offload=_bool(node, "offload", "teacher.offload", False),
        path=read_value(node, "path", "teacher.path"),
        flat_keys=flat,
        flat_backend=read_value(node, "backend", "teacher.backend") if "backend" in flat else None,
        rollout_backend=layouts.get("rollout"),
        train_backend=layouts.get("train"),
    )


def _engine_sections(
    cfg: Any, rules: AReaLVersion, teacher: Teacher | None
) -> Iterator[tuple[str, EngineSection]]:
    """The engine sections of ``cfg`` in config order: the roles that are present and not
    null, and every other top-level section with a ``backend`` key.

    A top-level value other than a section (a scalar, a list, an interpolation) is not
    read, so keys that only the application can resolve do not get in the way.
    """
    get_node = getattr(cfg, "_get_node", None)
    for name in config_keys(cfg):
        if name in ROLE:
            if name == "teacher" and rules.teacher_layout == "nested":
                section = _teacher_engine(cfg, rules, teacher)
                if section is not None:
                    yield name, section
                continue
            value = read_value(cfg, name, name)
            if is_absent(value):
                continue
            if not isinstance(value, Mapping):
                raise AllocationError(
                    f"{name}: the {name} engine must be a section, got {value!r}",
                    None,
                    None,
                    hint=f"write it as a section, e.g. {name}.backend={ROLE[name].example}, "
                    f"or remove {name}",
                )
            yield name, read_engine(value, name, name, rules.rows(name)[0], rules)
            continue
        if name in NOT_ENGINES:
            continue
        node = get_node(name) if get_node is not None else cfg[name]
        if is_mapping(node) and _has(node, "backend"):
            yield name, read_engine(read_value(cfg, name, name), name, name, None, rules)


def _teacher_engine(cfg: Any, rules: AReaLVersion, teacher: Teacher | None) -> EngineSection | None:
    """The engine a 2.0 teacher section builds: ``teacher.<engine_type>``, or None when
    ``engine_type`` names no layout or its subsection is absent (the rules say so)."""
    if teacher is None or teacher.flat_keys:
        return None
    engine_type = teacher.engine_type
    if engine_type not in TEACHER_LAYOUTS:
        return None
    node = _node(cfg, f"teacher.{engine_type}")
    if not _given(node):
        return None
    row = next(r for r in rules.rows("teacher") if r.engine_type == engine_type)
    return read_engine(node, "teacher", row.section, row, rules)


def read_engine(
    node: Any, name: str, section: str, row: EngineRow | None, rules: AReaLVersion
) -> EngineSection:
    """One engine section's keys, with AReaL's defaults (``rules.defaults``) where absent."""
    d = rules.defaults
    keys = set(config_keys(node))

    def at(key: str) -> str:
        return f"{section}.{key}"

    def sub(key: str, inner: str) -> Any:
        part = read_value(node, key, at(key))
        return read_value(part, inner, at(f"{key}.{inner}")) if is_mapping(part) else None

    megatron = read_value(node, "megatron", at("megatron"))
    ddp = read_value(megatron, "ddp", at("megatron.ddp")) if is_mapping(megatron) else None
    mb_spec = read_value(node, "mb_spec", at("mb_spec"))
    agent = read_value(node, "agent", at("agent"))
    distributed = (
        _bool(ddp, "use_distributed_optimizer", at("megatron.ddp.use_distributed_optimizer"), True)
        if is_mapping(ddp)
        else True
    )
    granularity = (
        read_value(megatron, "recompute_granularity", at("megatron.recompute_granularity"))
        if is_mapping(megatron)
        else None
    )
    bridge = (
        _text(megatron, "bridge_type", at("megatron.bridge_type"), "mbridge")
        if is_mapping(megatron)
        else "mbridge"
    )
    specs, specs_problem = _specs(node, at("scheduling_spec"))
    return EngineSection(
        name=name,
        section=section,
        row=row,
        backend=read_value(node, "backend", at("backend")),
        strategy=_strategy(node, at("scheduling_strategy")),
        specs=specs,
        specs_problem=specs_problem,
        allocation_written=_allocation_node(node),
        controller=_text(node, "_version", at("_version"), d["_version"]),
        offload=_bool(node, "offload", at("offload"), False),
        trainable=read_value(node, "optimizer", at("optimizer")) is not None
        if "optimizer" in keys
        else (row is not None and ROLE[row.name].trains),
        optimizer_given="optimizer" in keys,
        is_critic=_bool(node, "is_critic", at("is_critic"), name == "critic")
        if "is_critic" in keys
        else None,
        gradient_checkpointing=_bool(
            node, "gradient_checkpointing", at("gradient_checkpointing"), False
        ),
        tokens_per_mb=_int(
            mb_spec, "max_tokens_per_mb", at("mb_spec.max_tokens_per_mb"), None, 8192
        )
        if is_mapping(mb_spec)
        else None,
        attn_impl=str(_text(node, "attn_impl", at("attn_impl"), "flash_attention_2")),
        dtype=_text(node, "dtype", at("dtype"), d["dtype"]),
        grad_reduce_dtype=str(_text(node, "grad_reduce_dtype", at("grad_reduce_dtype"), "float32")),
        optimizer_dtype=_text(node, "optimizer_dtype", at("optimizer_dtype"), d["optimizer_dtype"]),
        distributed_optimizer=distributed,
        recompute_granularity=str(granularity) if granularity is not None else "full",
        bridge_type=str(bridge),
        path=read_value(node, "path", at("path")),
        kl_ctl=_number(node, "kl_ctl", at("kl_ctl")),
        weight_update_mode=_text(
            node, "weight_update_mode", at("weight_update_mode"), d["weight_update_mode"]
        ),
        weight_update_mode_given="weight_update_mode" in keys,
        enable_delta_weight_update=_bool(
            node, "enable_delta_weight_update", at("enable_delta_weight_update"), False
        ),
        weight_update_delta_method=_text(
            node,
            "weight_update_delta_method",
            at("weight_update_delta_method"),
            d["weight_update_delta_method"],
        ),
        weight_update_anchor_interval=_int(
            node,
            "weight_update_anchor_interval",
            at("weight_update_anchor_interval"),
            0,
            20,
            least=0,
        )
        or 0,
        use_lora=_bool(node, "use_lora", at("use_lora"), False),
        ppo_n_minibatches=_int(
            node, "ppo_n_minibatches", at("ppo_n_minibatches"), int(str(d["ppo_n_minibatches"])), 1
        )
        or 0,
        prox_logp_method=_text(
            node, "prox_logp_method", at("prox_logp_method"), d["prox_logp_method"]
        ),
        return_routed_experts=_bool(
            node, "return_routed_experts", at("return_routed_experts"), False
        ),
        agent_mode=(
            _text(agent, "mode", at("agent.mode"), d["agent_mode"])
            if is_mapping(agent)
            else d["agent_mode"]
        ),
        max_concurrent_rollouts=_int(
            node, "max_concurrent_rollouts", at("max_concurrent_rollouts"), None, 256
        ),
        consumer_batch_size=_int(node, "consumer_batch_size", at("consumer_batch_size"), None, 256),
        max_head_offpolicyness=_int(
            node, "max_head_offpolicyness", at("max_head_offpolicyness"), 0, 2, least=0
        )
        or 0,
    )


def _allocation_node(node: Any) -> object:
    """An ``allocation`` node's value as written, unless it is the resolver that derives it
    from the backend (None: absent, or as it should be)."""
    if not _has(node, "allocation"):
        return None
    get_node = getattr(node, "_get_node", None)
    child = get_node("allocation") if callable(get_node) else None
    if child is None or not hasattr(child, "_value"):
        return None  # a plain mapping: nothing resolves it, nothing to disagree with
    written = child._value()
    if written is None or written == ALLOCATION_NODE:
        return None
    return written if isinstance(written, str) else str(written)


def _strategy(node: Any, prefix: str) -> Strategy:
    strategy = read_value(node, "scheduling_strategy", prefix)
    if is_null(strategy):
        return Strategy()
    if not isinstance(strategy, Mapping):
        raise AllocationError(
            f"{prefix}: must be a section with type, target and fork, got {strategy!r}",
            None,
            None,
            # '~' first: Hydra cannot set a key under a value that is no section.
            hint=f"e.g. ~{prefix} ++{prefix}.type=colocation ++{prefix}.target={INHERIT_FROM}",
        )
    from areal_conf.roles import SCHEDULING_TYPES

    kind = read_value(strategy, "type", f"{prefix}.type")
    kind = "separation" if kind is None or kind == "" else kind
    if kind not in SCHEDULING_TYPES:
        raise AllocationError(
            f"{prefix}.type: unknown scheduling type {kind!r}",
            kind if isinstance(kind, str) else None,
            None,
            hint=f"use {' or '.join(SCHEDULING_TYPES)}",
        )
    target = read_value(strategy, "target", f"{prefix}.target")
    if target is not None and not isinstance(target, str):
        raise AllocationError(
            f"{prefix}.target: must be an engine name, got {target!r}",
            None,
            None,
            hint=f"e.g. {prefix}.target={INHERIT_FROM}",
        )
    fork = read_value(strategy, "fork", f"{prefix}.fork", True)
    fork = True if fork is None else fork
    if not isinstance(fork, bool):
        raise AllocationError(
            f"{prefix}.fork: must be true or false, got {fork!r}",
            None,
            None,
            hint=f"{prefix}.fork=true (new processes on the target's GPUs, the default) or "
            "false (reuse the target's processes)",
        )
    return Strategy(str(kind), target or None, fork)


def _specs(node: Any, where: str) -> tuple[tuple[WorkerSpec, ...] | None, str]:
    """The ``scheduling_spec`` entries (None when the key is absent or null), and what is
    wrong with its shape (``""``: nothing)."""
    if not _has(node, "scheduling_spec"):
        return None, ""
    value = read_value(node, "scheduling_spec", where)
    if is_null(value):
        return None, ""
    if isinstance(value, Mapping | str | bytes) or not hasattr(value, "__iter__"):
        return (), f"must be a list of worker specs, got {value!r}"
    entries = []
    for i, entry in enumerate(value):
        if not is_mapping(entry):
            return (), f"entry {i} must be a section (gpu, cpu, mem, ...), got {entry!r}"
        gpu = read_value(entry, "gpu", f"{where}.{i}.gpu", 0)
        if type(gpu) is not int or gpu < 0:
            raise AllocationError(
                f"{where}.{i}.gpu: must be a whole number of GPUs, got {gpu!r}",
                None,
                None,
                hint=f"e.g. {where}.{i}.gpu=1",
            )
        cmds = read_value(entry, "additional_bash_cmds", f"{where}.{i}.additional_bash_cmds")
        entries.append(WorkerSpec(gpu, bool(cmds)))
    return tuple(entries), ""


def _read_workload(cfg: Any) -> Workload:
    offload = _bool(cfg, "enable_offload", "enable_offload", False) if is_mapping(cfg) else False
    fractions: dict[str, float] = {}
    dtypes: dict[str, str] = {}
    for server, key in (("sglang", "mem_fraction_static"), ("vllm", "gpu_memory_utilization")):
        node = read_value(cfg, server, server)
        if not is_mapping(node):
            continue
        # a fraction of the GPU's memory (AReaL passes it to the server as written)
        fraction = _number(node, key, f"{server}.{key}", least=0.0, most=1.0)
        if fraction is not None:
            fractions[server] = float(fraction)
        dtype = read_value(node, "dtype", f"{server}.dtype")
        if dtype is not None:
            dtypes[server] = str(dtype)
    dataset = read_value(cfg, "train_dataset", "train_dataset")
    batch = max_length = None
    if is_mapping(dataset):
        batch = _int(dataset, "batch_size", "train_dataset.batch_size", None, 256)
        max_length = _int(dataset, "max_length", "train_dataset.max_length", None, 1024)
    gconfig = read_value(cfg, "gconfig", "gconfig")
    new_tokens = samples = None
    if is_mapping(gconfig):
        new_tokens = _int(gconfig, "max_new_tokens", "gconfig.max_new_tokens", None, 1024)
        samples = _int(gconfig, "n_samples", "gconfig.n_samples", None, 4)
    return Workload(
        enable_offload=offload,
        enable_offload_given="enable_offload" in config_keys(cfg),
        mem_fraction=fractions,
        server_dtype=dtypes,
        batch_size=batch,
        prompt_len=max_length or 0,
        max_new_tokens=16384 if new_tokens is None else new_tokens,
        n_samples=samples or 1,
        max_length=max_length,
    )


# ------------------------------------------------------------------------- the trainer

#: The AReaL trainer a config is for: RL (``PPOConfig``, ``GRPOConfig`` and the drivers'
#: subclasses of them; ``PPOTrainer``), SFT (``SFTConfig``), a reward model (``RWConfig``)
#: or DPO (``DPOConfig``).
Trainer = Literal["rl", "sft", "rw", "dpo"]
#: Top-level keys that only AReaL's RL config (``PPOConfig``) has.
RL_KEYS: Final = ("gconfig", "eval_gconfig", "dynamic_bs")
#: Engine sections that only ``PPOConfig`` has.
RL_ENGINES: Final = ("rollout", "critic", "teacher")


def read_trainer(
    cfg: Any, engines: Mapping[str, EngineSection], teacher: Teacher | None
) -> Trainer:
    """Which AReaL trainer ``cfg`` is for, from the keys that only its config class has
    (AReaL 2.0, ``areal/api/cli_args.py``; OmegaConf's strict merge of the driver's class
    refuses any other key, so a config AReaL loads has no key of another trainer's):

    - RL: ``gconfig``, ``eval_gconfig``, ``dynamic_bs`` or a ``rollout``, ``critic`` or
      ``teacher`` engine (``PPOConfig``, cli_args.py:3396-3464);
    - DPO: otherwise a ``ref`` engine (``DPOConfig``: ``actor`` and ``ref``, 3325-3339);
    - RW: otherwise ``actor.is_critic: true``, which ``RWConfig`` requires (3281-3293);
    - SFT: otherwise (``SFTConfig``: ``actor`` only, 3274-3278).

    Engine sections count when they are engines (present, not null, not left unset by
    ``areal_schema``), so areal-conf's own configs read the same.
    """
    keys = config_keys(cfg)
    if (
        any(key in keys for key in RL_KEYS)
        or teacher is not None
        or any(name in engines for name in RL_ENGINES)
    ):
        return "rl"
    if "ref" in engines:
        return "dpo"
    actor = engines.get("actor")
    if actor is not None and actor.is_critic:
        return "rw"
    return "sft"


def engine_names(cfg: Any, rules: AReaLVersion) -> list[str]:
    """The engine sections of ``cfg`` (built or not), by plan name, in config order."""
    return list(read_config(cfg, rules).engines)


def has_engines(cfg: Any) -> bool:
    """True when ``cfg`` has an engine section or the deprecated ``allocation_mode``."""
    keys = config_keys(cfg)
    if not keys:
        return False
    if LEGACY_KEY in keys or any(k in ROLE for k in keys):
        return True
    get_node = getattr(cfg, "_get_node", None)
    for name in keys:
        if name in NOT_ENGINES:
            continue
        try:
            node = get_node(name) if get_node is not None else cfg[name]
        except Exception:
            return True
        if is_mapping(node) and _has(node, "backend"):
            return True
    return False

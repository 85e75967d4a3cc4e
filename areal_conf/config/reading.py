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

import functools
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, Final

from areal_conf.areal.roles import (
    ALLOCATION_NODE,
    INHERIT_FROM,
    LEGACY_KEY,
    ROLE,
    TEACHER_LAYOUTS,
)
from areal_conf.areal.versions import AReaLVersion, EngineRow
from areal_conf.config.areal_defaults import default_at
from areal_conf.config.backend_knobs import backend_knobs
from areal_conf.config.known_keys import check_keys
from areal_conf.config.nodes import (
    ABSENT_DEFAULT,
    INTERPOLATIONS,
    KEYS_SEEN,
    PRESENT,
    as_int_field,
    given_section,
    has_key,
    is_absent,
    is_mapping,
    is_null,
    read_bool,
    read_int,
    read_number,
    read_text,
    read_value,
    section_at,
)
from areal_conf.config.run_config import (
    Cluster,
    EngineSection,
    RunConfig,
    Strategy,
    Teacher,
    Trainer,
    WorkerSpec,
    Workload,
)
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.hints import either, fix, sentence

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
    First every key is checked against AReaL's (:func:`areal_conf.config.known_keys.check_keys`),
    unless ``keys`` is false (for an error reported before the keys)."""
    token = KEYS_SEEN.set({})
    present: set[str] = set()
    interpolations: dict[str, str] = {}
    found = PRESENT.set(present)
    followed = INTERPOLATIONS.set(interpolations)
    defaults = ABSENT_DEFAULT.set(functools.partial(default_at, cfg, version=rules.version))
    try:
        run = _read_config(cfg, rules, keys)
        return replace(run, present_keys=frozenset(present), interpolations=interpolations)
    finally:
        KEYS_SEEN.reset(token)
        PRESENT.reset(found)
        INTERPOLATIONS.reset(followed)
        ABSENT_DEFAULT.reset(defaults)


def _read_config(cfg: Any, rules: AReaLVersion, keys: bool) -> RunConfig:
    if not isinstance(cfg, Mapping):
        raise AllocationError(
            f"the config must be a mapping of sections, got {type(cfg).__name__}",
            cfg,
            hint="pass the composed config itself, e.g. validate(cfg) inside @hydra.main",
        )
    # The keys before any value is read: a misspelt key is the cause of what follows. A
    # value AReaL's merge refuses waits for the reading below, whose messages say more.
    wrong_value, missing = check_keys(cfg, rules.version) if keys else (None, ())
    cluster = read_cluster(cfg)
    scheduler = read_value(cfg, "scheduler", "scheduler")
    if not is_null(scheduler) and not is_mapping(scheduler):
        raise ConfigError(
            f"scheduler: must be a section, got {scheduler!r}",
            hint=sentence("e.g. ", fix("scheduler.type=local"), " (one machine), slurm or ray"),
        )
    scheduler_type = (
        read_value(scheduler, "type", "scheduler.type") if is_mapping(scheduler) else None
    )
    nested = rules.teacher_layout == "nested"
    teacher = _read_teacher(cfg) if nested or given_section(section_at(cfg, "teacher")) else None
    engines = dict(_engine_sections(cfg, rules, teacher))
    workload = _read_workload(cfg)
    model_node = read_value(cfg, "model", "model")
    model = (
        {str(k): read_value(model_node, str(k), f"model.{k}") for k in model_node}
        if is_mapping(model_node)
        else {}
    )
    trainer = read_trainer(cfg, engines, teacher)
    if wrong_value is not None:
        raise wrong_value
    return RunConfig(
        rules=rules,
        engines=engines,
        teacher=teacher,
        cluster=cluster,
        scheduler_type=scheduler_type,
        scheduler_given=is_mapping(scheduler) and has_key(scheduler, "type"),
        workload=workload,
        model=model,
        own_config="model" in config_keys(cfg),
        trainer=trainer,
        missing_values=missing,
    )


def read_cluster(cfg: Any) -> Cluster:
    cluster = read_value(cfg, "cluster", "cluster")
    if cluster is None:
        cluster = {}
    if not isinstance(cluster, Mapping):
        raise AllocationError(
            f"cluster: must be a section, got {type(cluster).__name__}",
            cluster,
            hint="e.g. cluster: {n_nodes: 1, n_gpus_per_node: 8}",
        )
    values = []
    # n_gpus_per_node 0 is AReaL's CPU template.
    for field_name, default, least in (("n_nodes", 1, 1), ("n_gpus_per_node", 8, 0)):
        value = as_int_field(read_value(cluster, field_name, f"cluster.{field_name}", default))
        if type(value) is not int or value < least:
            what = "a positive whole number" if least else "a whole number, 0 for a CPU run"
            raise AllocationError(
                f"cluster.{field_name}: must be {what}, got {value!r}",
                value,
                hint=fix(f"cluster.{field_name}={default}", lead="e.g. "),
            )
        values.append(value)
    gb = read_value(cluster, "gpu_memory_gb", "cluster.gpu_memory_gb")
    if gb is not None and (
        isinstance(gb, bool) or not isinstance(gb, int | float) or not 0 < gb < float("inf")
    ):
        raise AllocationError(
            f"cluster.gpu_memory_gb: must be a positive number of GB (10^9 bytes), got {gb!r}",
            gb,
            hint=sentence("e.g. ", fix("cluster.gpu_memory_gb=80"), " for an 80 GB GPU"),
        )
    from areal_conf.config.run_config import check_cluster_size

    check_cluster_size(values[0], values[1])
    return Cluster(values[0], values[1], None if gb is None else float(gb))


def _read_teacher(cfg: Any) -> Teacher | None:
    node = read_value(cfg, "teacher", "teacher")
    if is_absent(node):
        return None
    if not isinstance(node, Mapping):
        raise ConfigError(
            f"teacher: the teacher must be a section, got {node!r}",
            hint="e.g. teacher.rollout.backend=sglang:d1t4 (an inference teacher), or remove "
            "teacher",
        )
    keys = config_keys(node)
    flat = tuple(k for k in keys if k not in TEACHER_KEYS)
    layouts = {
        layout: read_value(sub, "backend", f"teacher.{layout}.backend")
        for layout in TEACHER_LAYOUTS
        if given_section(sub := read_value(node, layout, f"teacher.{layout}"))
    }
    return Teacher(
        engine_type=read_text(node, "engine_type", "teacher.engine_type", "rollout"),
        engine_type_given=read_value(node, "engine_type", "teacher.engine_type") is not None,
        has_rollout=given_section(read_value(node, "rollout", "teacher.rollout")),
        has_train=given_section(read_value(node, "train", "teacher.train")),
        offload=read_bool(node, "offload", "teacher.offload", False),
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
                raise ConfigError(
                    f"{name}: the {name} engine must be a section, got {value!r}",
                    hint=either(
                        sentence(
                            "write it as a section, e.g. ",
                            fix(f"{name}.backend={ROLE[name].example}"),
                        ),
                        ", or ",
                        f"remove {name}",
                    ),
                )
            yield name, read_engine(value, name, name, rules.rows(name)[0], rules)
            continue
        if name in NOT_ENGINES:
            continue
        node = get_node(name) if get_node is not None else cfg[name]
        if is_mapping(node) and has_key(node, "backend"):
            yield name, read_engine(read_value(cfg, name, name), name, name, None, rules)


def _teacher_engine(cfg: Any, rules: AReaLVersion, teacher: Teacher | None) -> EngineSection | None:
    """The engine a 2.0 teacher section builds: ``teacher.<engine_type>``, or None when
    ``engine_type`` names no layout or its subsection is absent (the rules say so)."""
    if teacher is None or teacher.flat_keys:
        return None
    engine_type = teacher.engine_type
    if engine_type not in TEACHER_LAYOUTS:
        return None
    node = section_at(cfg, f"teacher.{engine_type}")
    if not given_section(node):
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

    mb_spec = read_value(node, "mb_spec", at("mb_spec"))
    agent = read_value(node, "agent", at("agent"))
    specs, specs_problem = _specs(node, at("scheduling_spec"))
    backend = read_value(node, "backend", at("backend"))
    dtype = read_text(node, "dtype", at("dtype"), d["dtype"])
    return EngineSection(
        name=name,
        section=section,
        row=row,
        backend=backend,
        strategy=_strategy(node, at("scheduling_strategy")),
        specs=specs,
        specs_problem=specs_problem,
        allocation_written=_allocation_node(node),
        controller=read_text(node, "_version", at("_version"), d["_version"]),
        offload=read_bool(node, "offload", at("offload"), False),
        trainable=read_value(node, "optimizer", at("optimizer")) is not None
        if "optimizer" in keys
        else (row is not None and ROLE[row.name].trains),
        optimizer_given="optimizer" in keys,
        is_critic=read_bool(node, "is_critic", at("is_critic"), name == "critic")
        if "is_critic" in keys
        else None,
        gradient_checkpointing=read_bool(
            node, "gradient_checkpointing", at("gradient_checkpointing"), False
        ),
        tokens_per_mb=read_int(
            mb_spec, "max_tokens_per_mb", at("mb_spec.max_tokens_per_mb"), None, 8192
        )
        if is_mapping(mb_spec)
        else None,
        attn_impl=str(read_text(node, "attn_impl", at("attn_impl"), "flash_attention_2")),
        dtype=dtype,
        optimizer_dtype=read_text(
            node, "optimizer_dtype", at("optimizer_dtype"), d["optimizer_dtype"]
        ),
        **backend_knobs(node, section, backend, dtype),
        path=read_value(node, "path", at("path")),
        kl_ctl=read_number(node, "kl_ctl", at("kl_ctl")),
        weight_update_mode=read_text(
            node, "weight_update_mode", at("weight_update_mode"), d["weight_update_mode"]
        ),
        weight_update_mode_given="weight_update_mode" in keys,
        enable_delta_weight_update=read_bool(
            node, "enable_delta_weight_update", at("enable_delta_weight_update"), False
        ),
        weight_update_delta_method=read_text(
            node,
            "weight_update_delta_method",
            at("weight_update_delta_method"),
            d["weight_update_delta_method"],
        ),
        weight_update_anchor_interval=read_int(
            node,
            "weight_update_anchor_interval",
            at("weight_update_anchor_interval"),
            0,
            20,
            least=0,
        )
        or 0,
        use_lora=read_bool(node, "use_lora", at("use_lora"), False),
        lora_rank=read_int(node, "lora_rank", at("lora_rank"), int(str(d["lora_rank"])), 32, 0)
        or 32,
        ppo_n_minibatches=read_int(
            node, "ppo_n_minibatches", at("ppo_n_minibatches"), int(str(d["ppo_n_minibatches"])), 1
        )
        or 0,
        prox_logp_method=read_text(
            node, "prox_logp_method", at("prox_logp_method"), d["prox_logp_method"]
        ),
        recompute_logprob=read_bool(node, "recompute_logprob", at("recompute_logprob"), False),
        use_decoupled_loss=read_bool(node, "use_decoupled_loss", at("use_decoupled_loss"), False),
        return_routed_experts=read_bool(
            node, "return_routed_experts", at("return_routed_experts"), False
        ),
        agent_mode=(
            read_text(agent, "mode", at("agent.mode"), d["agent_mode"])
            if is_mapping(agent)
            else d["agent_mode"]
        ),
        max_concurrent_rollouts=read_int(
            node, "max_concurrent_rollouts", at("max_concurrent_rollouts"), None, 256
        ),
        consumer_batch_size=read_int(
            node, "consumer_batch_size", at("consumer_batch_size"), None, 256
        ),
        queue_size=read_int(node, "queue_size", at("queue_size"), None, 4096),
        max_head_offpolicyness=read_int(
            node, "max_head_offpolicyness", at("max_head_offpolicyness"), 0, 2, least=0
        )
        or 0,
    )


def _allocation_node(node: Any) -> object:
    """An ``allocation`` node's value as written, unless it is the resolver that derives it
    from the backend (None: absent, or as it should be)."""
    if not has_key(node, "allocation"):
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
        raise ConfigError(
            f"{prefix}: must be a section with type, target and fork, got {strategy!r}",
            # '~' first: Hydra cannot set a key under a value that is no section.
            hint=fix(
                f"~{prefix}",
                f"++{prefix}.type=colocation",
                f"++{prefix}.target={INHERIT_FROM}",
                lead="e.g. ",
            ),
        )
    from areal_conf.areal.roles import SCHEDULING_TYPES

    kind = read_value(strategy, "type", f"{prefix}.type")
    kind = "separation" if kind is None or kind == "" else kind
    if kind not in SCHEDULING_TYPES:
        raise AllocationError(
            f"{prefix}.type: unknown scheduling type {kind!r}",
            kind if isinstance(kind, str) else None,
            hint=f"use {' or '.join(SCHEDULING_TYPES)}",
        )
    target = read_value(strategy, "target", f"{prefix}.target")
    if target is not None and not isinstance(target, str):
        raise ConfigError(
            f"{prefix}.target: must be an engine name, got {target!r}",
            hint=fix(f"{prefix}.target={INHERIT_FROM}", lead="e.g. "),
        )
    fork = read_value(strategy, "fork", f"{prefix}.fork", True)
    fork = True if fork is None else fork
    if not isinstance(fork, bool):
        raise ConfigError(
            f"{prefix}.fork: must be true or false, got {fork!r}",
            hint=either(
                fix(
                    f"{prefix}.fork=true",
                    remark=" (new processes on the target's GPUs, the default)",
                ),
                " or ",
                "false (reuse the target's processes)",
            ),
        )
    return Strategy(str(kind), target or None, fork)


def _specs(node: Any, where: str) -> tuple[tuple[WorkerSpec, ...] | None, str]:
    """The ``scheduling_spec`` entries (None when the key is absent or null), and what is
    wrong with its shape (``""``: nothing)."""
    if not has_key(node, "scheduling_spec"):
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
        gpu = as_int_field(read_value(entry, "gpu", f"{where}.{i}.gpu", 0))
        if type(gpu) is not int or gpu < 0:
            raise ConfigError(
                f"{where}.{i}.gpu: must be a whole number of GPUs, got {gpu!r}",
                hint=f"e.g. {where}.{i}.gpu=1",
            )
        cmds = read_value(entry, "additional_bash_cmds", f"{where}.{i}.additional_bash_cmds")
        entries.append(WorkerSpec(gpu, bool(cmds)))
    return tuple(entries), ""


def _read_workload(cfg: Any) -> Workload:
    offload = (
        read_bool(cfg, "enable_offload", "enable_offload", False) if is_mapping(cfg) else False
    )
    fractions: dict[str, float] = {}
    dtypes: dict[str, str] = {}
    for server, key in (("sglang", "mem_fraction_static"), ("vllm", "gpu_memory_utilization")):
        node = read_value(cfg, server, server)
        if not is_mapping(node):
            continue
        # a fraction of the GPU's memory (AReaL passes it to the server as written)
        fraction = read_number(node, key, f"{server}.{key}", least=0.0, most=1.0)
        if fraction is not None:
            fractions[server] = float(fraction)
        dtype = read_value(node, "dtype", f"{server}.dtype")
        if dtype is not None:
            dtypes[server] = str(dtype)
    dataset = read_value(cfg, "train_dataset", "train_dataset")
    batch = max_length = None
    if is_mapping(dataset):
        # AReaL's default (_DatasetConfig.batch_size, areal/api/cli_args.py:3097-3099)
        batch = read_int(dataset, "batch_size", "train_dataset.batch_size", 1, 256)
        max_length = read_int(dataset, "max_length", "train_dataset.max_length", None, 1024)
    gconfig = read_value(cfg, "gconfig", "gconfig")
    new_tokens = samples = None
    if is_mapping(gconfig):
        new_tokens = read_int(gconfig, "max_new_tokens", "gconfig.max_new_tokens", None, 1024)
        samples = read_int(gconfig, "n_samples", "gconfig.n_samples", None, 4)
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
        if is_mapping(node) and has_key(node, "backend"):
            return True
    return False

"""A config as the rules see it: the typed objects :func:`areal_conf.config.reading.read_config`
builds, once, and every rule reads (never the raw config)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from areal_conf.areal.drivers import DriverScope
from areal_conf.areal.versions import AReaLVersion, EngineRow
from areal_conf.errors import ConfigError, ErrorAtKey
from areal_conf.hints import fix, sentence
from areal_conf.spec.backends import MAX_SIZE

#: The AReaL trainer a config is for: RL (``PPOConfig``, ``GRPOConfig`` and the drivers'
#: subclasses of them; ``PPOTrainer``), SFT (``SFTConfig``), a reward model (``RWConfig``)
#: or DPO (``DPOConfig``).
Trainer = Literal["rl", "sft", "rw", "dpo"]


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
    # Megatron's data-parallel overlap (megatron.ddp.overlap_grad_reduce and
    # overlap_param_gather, AReaL's defaults off) and interleaved pipeline
    # (megatron.virtual_pipeline_parallel_size)
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    virtual_stages: int = 1
    #: Keys the engine sets that change its speed but the step-time model does not price
    #: (``actor.megatron.fp8_config``), for the plan to say so.
    unpriced: tuple[str, ...] = ()
    recompute_granularity: str = "full"  # megatron.recompute_granularity
    #: What Archon recomputes with gradient_checkpointing (archon.ac_mode and
    #: selective_ac_option): "op" (its default: op-level), "full" or "none".
    archon_recompute: str = "op"
    bridge_type: str = "mbridge"  # megatron.bridge_type: which library builds the model
    #: megatron.moe_token_dispatcher_type flex (DeepEP): a token crosses to a node once
    dedup_dispatch: bool = False
    #: megatron.fp8_config is set: the engine trains in FP8, with its recipe if it is one
    #: Transformer Engine runs (None: bf16, or a recipe the step time does not price)
    fp8_training: bool = False
    fp8_recipe: str | None = None
    #: fp8_config.param and megatron.ddp.fp8_param_gather: weights kept and gathered in FP8
    fp8_param_gather: bool = False
    path: object = None
    # the actor's keys of the RL rules
    kl_ctl: int | float | None = None  # None: absent
    weight_update_mode: object = "xccl"
    weight_update_mode_given: bool = False
    enable_delta_weight_update: bool = False
    weight_update_delta_method: object = "adamw"
    weight_update_anchor_interval: int = 0
    use_lora: bool = False
    lora_rank: int = 32  # AReaL's default (cli_args.py:1380)
    ppo_n_minibatches: int = 4
    prox_logp_method: object = "recompute"
    recompute_logprob: bool = False
    use_decoupled_loss: bool = False
    # inference engines
    return_routed_experts: bool = False
    agent_mode: object = "inline"
    max_concurrent_rollouts: int | None = None
    consumer_batch_size: int | None = None
    queue_size: int | None = None
    # The rollout may run this many weight versions ahead: above 0, generation overlaps
    # training (AReaL's asynchronous RL).
    max_head_offpolicyness: int = 0

    @property
    def consumer_batch(self) -> int:
        """``consumer_batch_size``: the rollouts a weight version admits, 1 when not given
        (``areal/api/cli_args.py:2498-2501``)."""
        return max(1, self.consumer_batch_size or 1)

    @property
    def rollouts_cap(self) -> int:
        """Rollouts an inference engine runs at once at most: ``max_concurrent_rollouts``,
        by default ``consumer_batch_size`` (``rollout_controller.py:205-206``,
        ``workflow_executor.py:786-787``)."""
        return max(1, self.max_concurrent_rollouts or self.consumer_batch)

    @property
    def rollout_queue(self) -> int:
        """Rollouts the rollout's queue holds: ``queue_size``, by default 16 times
        ``max_concurrent_rollouts`` or its default (``rollout_controller.py:217``,
        ``workflow_executor.py:1088``)."""
        return self.queue_size or 16 * (self.max_concurrent_rollouts or self.consumer_batch)

    @property
    def computes_prox_logp(self) -> bool:
        """The actor recomputes the batch's log-probabilities before training (a forward
        pass): AReaL's ``PPOActorConfig.should_compute_prox_logp``
        (``areal/api/cli_args.py:1861-1872``; the methods that skip the pass,
        ``areal/utils/constants.py:53-55``)."""
        if self.use_decoupled_loss:
            return self.prox_logp_method not in ("loglinear", "reuse_train_logp")
        return self.recompute_logprob

    def recompute(self, backend: str) -> str:
        """What this engine recomputes in the backward on ``backend``: ``"none"`` without
        ``gradient_checkpointing``; else Megatron's ``recompute_granularity`` (``"full"``
        or ``"selective"``, the attention core), Archon's ``ac_mode`` (``"op"`` by
        default), whole layers (``"full"``) on FSDP."""
        if not self.gradient_checkpointing:
            return "none"
        if backend == "megatron":
            return "selective" if self.recompute_granularity == "selective" else "full"
        if backend == "archon":
            return self.archon_recompute
        return "full"

    def full_recompute(self, backend: str) -> tuple[tuple[str, str], ...]:
        """The overrides after which this engine recomputes whole layers on ``backend``."""
        out = [] if self.gradient_checkpointing else [(self.key("gradient_checkpointing"), "true")]
        if backend == "megatron" and self.recompute_granularity != "full":
            out.append((self.key("megatron.recompute_granularity"), "full"))
        if backend == "archon" and self.archon_recompute != "full":
            out.append((self.key("archon.ac_mode"), "full"))
        return tuple((f"++{key}", value) for key, value in out)

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
    #: The values read that were interpolations, as written (``${actor.backend}``), by
    #: key: an edit of a key one of them may name means reading the config again.
    interpolations: Mapping[str, str] = field(default_factory=dict)
    #: Values AReaL's loader requires that the config does not give (``experiment_name``,
    #: ``train_dataset.path``, ...), one error each: a whole AReaL config may not lack
    #: them (the check of an AReaL command refuses it); a config given to ``validate``
    #: for its layouts may.
    missing_values: tuple[ErrorAtKey, ...] = ()
    #: The driver script builds no AReaL trainer and only the engines it reads (None:
    #: a trainer builds every engine).
    driver: DriverScope | None = None

    @property
    def rl(self) -> bool:
        """PPOTrainer's checks apply: the config has an actor and a rollout, and the
        driver builds a trainer."""
        return "actor" in self.engines and "rollout" in self.engines and self.driver is None

    @property
    def actor(self) -> EngineSection | None:
        return self.engines.get("actor")

    @property
    def rollout(self) -> EngineSection | None:
        return self.engines.get("rollout")

    @property
    def actor_rollout_colocated(self) -> bool:
        """The actor and the rollout share GPUs as the config writes it, either way round
        (AReaL's ``_is_actor_rollout_colocated``, ``areal/trainer/rl_trainer.py:502-507``)."""
        actor, rollout = self.actor, self.rollout
        if actor is None or rollout is None:
            return False
        return (actor.strategy.colocated and actor.strategy.target == "rollout") or (
            rollout.strategy.colocated and rollout.strategy.target == "actor"
        )

    @property
    def v1_awex(self) -> bool:
        """Controller v1 with AWEX weight updates: the actor and the rollout time-share the
        actor's GPUs, whatever the scheduling strategy (``rl_trainer.py:509-526``)."""
        actor = self.actor
        return actor is not None and actor.controller == "v1" and actor.weight_update_mode == "awex"

    def offload_flags(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Why PPOTrainer offloads engines between the phases of a step, each reason with
        the engines it offloads, in AReaL's order (``rl_trainer.py:155-171``):
        ``"colocation"`` (the actor and the rollout share GPUs) offloads both, and each
        engine's ``<name>.offload`` (the teacher's is ``teacher.offload``) that engine. v1
        AWEX clears the actor's and the rollout's: it switches them by hand.
        ``enable_offload`` alone offloads nothing; it lets these flags work."""
        awex = self.v1_awex
        flags: list[tuple[str, tuple[str, ...]]] = []
        if self.rl and self.actor_rollout_colocated and not awex:
            flags.append(("colocation", ("rollout", "actor")))
        for name in ("actor", "critic", "ref"):
            engine = self.engines.get(name)
            if engine is not None and engine.offload and not (name == "actor" and awex):
                flags.append((f"{name}.offload", (name,)))
        if self.teacher is not None and self.teacher.offload:
            flags.append(("teacher.offload", ("teacher",)))
        return tuple(flags)

    def leaves_gpus(self, name: str) -> bool:
        """Engine ``name`` leaves its GPUs while the engines it shares them with run: an
        offload flag, or v1 AWEX's switch of the actor and the rollout by hand
        (``rl_trainer.py:768-783``)."""
        if self.rl and self.v1_awex and name in ("actor", "rollout"):
            return True
        return any(name in engines for _, engines in self.offload_flags())


def check_cluster_size(n_nodes: int, n_gpus_per_node: int) -> None:
    """A cluster holds at most 2**20 GPUs, the largest world size a backend string can
    ask for: larger sizes are a typo, and planning them would take unbounded time and
    memory."""
    total = n_nodes * n_gpus_per_node
    if total <= MAX_SIZE:
        return
    raise ConfigError(
        f"cluster: {n_nodes:,} node{'s' if n_nodes != 1 else ''} × {n_gpus_per_node:,} GPUs "
        f"is {total:,} GPUs, more than the {MAX_SIZE:,} (2**20) that areal-conf plans for, "
        "the largest world size an engine can have",
        hint=sentence(
            "check cluster.n_nodes and cluster.n_gpus_per_node (the GPUs of one node, e.g. ",
            fix("cluster.n_gpus_per_node=8"),
            ")",
        ),
    )

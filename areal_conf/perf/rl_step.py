"""One RL step as AReaL's trainer runs it: its phases, how they overlap, and the trained
tokens a second (:func:`rl_step`).

AReaL's ``PPOTrainer.train`` (``areal/trainer/rl_trainer.py:640-966``) runs each step in
this order, each phase timed under ``timeperf/<key>`` by ``stats_tracker.record_timing``:

1. ``rollout``: wait until the rollout has generated a batch (``prepare_batch``,
   ``:688-708``);
2. ``critic_values``, ``ref_logp``, ``teacher_logp``: forward passes of the critic, the
   ref and the teacher over the batch (``:712-766``), the teacher's with its own model
   (a prefill on its servers when it is an inference engine);
3. ``recompute_logp``: the actor's forward pass, when it recomputes log-probabilities
   (``:784-796``);
4. ``compute_advantage``, ``train_step`` (the actor's PPO update, ``:798-827``),
   ``critic_train_step`` (``:842-852``);
5. ``rollout.pause()``, then ``update_weights``: the new weights to the rollout's servers
   (``:873-897``), save, evaluation, then ``rollout.resume()`` (``:964``).

What overlaps:

- **asynchronous** (``rollout.max_head_offpolicyness`` ≥ 1): the rollout keeps
  generating while 2-4 run, up to that many weight versions ahead
  (``areal/infra/staleness_manager.py:79-112``); it is paused only for 5. A step takes
  the longer of generating a batch and the training phases, plus 5; the ``rollout`` wait
  is what generation lacks.
- **synchronous** (``max_head_offpolicyness`` 0): the staleness cap admits only the
  current version's batch, so generation of the next batch starts when 5 ends. A step
  is the sum, and generating a batch lasts at least as long as its longest response.
- **colocated** (actor and rollout on the same GPUs): generation, then the rollout
  offloaded and the actor onloaded (``_offload_rollout``/``_onload_model``,
  ``:548-626``), training, update, the actor offloaded and the rollout onloaded. A sum,
  with those transfers.

Engines with ``offload: true`` (ref, critic, teacher) are onloaded before their pass and
offloaded after it (``:713-766``, ``:854-855``). ``compute_advantage``, saving and
evaluation are not counted (advantages are arithmetic on the batch; saving and evaluation
run every ``freq_steps``).

Each phase is priced by the models areal-conf already has: decode throughput
(:mod:`areal_conf.perf.decode`) for generation, the step-time model
(:mod:`areal_conf.perf.step_time`) for training and forward passes, bytes over links for
weight updates and offloads. A :class:`Calibration` scales each kind of phase by what a
real run measured (``python -m areal_conf tune``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from areal_conf.config.run_config import EngineSection, RunConfig
from areal_conf.errors import ConfigError
from areal_conf.model.hardware import Hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.decode import (
    DecodeThroughput,
    RequestLengths,
    decode_throughput,
    prefill_seconds,
)
from areal_conf.perf.parameters import parameter_count
from areal_conf.perf.speed import TrainingStep, training_step
from areal_conf.perf.workload import (
    StepWorkload,
    concurrent_sequences,
    step_workload,
)
from areal_conf.spec.allocation import ModelAllocation

Mode = Literal["asynchronous", "synchronous", "colocated"]

#: Phases that run while an asynchronous rollout keeps generating, in AReaL's order.
TRAINING_SIDE: Final = (
    "critic_values",
    "ref_logp",
    "teacher_logp",
    "recompute_logp",
    "train",
    "critic_train",
)
#: The phases of a step, in the order AReaL runs them.
PHASES: Final = ("generate", *TRAINING_SIDE, "update_weights", "offload", "onload", "other")

#: The ``timeperf/`` keys of AReaL's stats that measure each phase (summed).
TIMEPERF_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "critic_values": ("critic_values",),
    "ref_logp": ("ref_logp",),
    "teacher_logp": ("teacher_logp",),
    "recompute_logp": ("recompute_logp",),
    "train": ("train_step",),
    "critic_train": ("critic_train_step",),
    "update_weights": ("update_weights",),
    "offload": tuple(
        f"{role}_offload" for role in ("rollout", "actor", "critic", "ref", "teacher")
    ),
    "onload": tuple(f"{role}_onload" for role in ("rollout", "actor", "critic", "ref", "teacher")),
}

#: The bytes a weight travels in from the trainer to the servers (bf16).
WEIGHT_BYTES: Final = 2


@dataclass(frozen=True)
class Calibration:
    """How much longer than predicted each kind of phase ran on a cluster (1: as
    predicted). ``generate``: generation; ``train``: every training engine's passes
    (PPO updates and forward passes); ``update_weights``: the weight update;
    ``transfer``: offloads and onloads."""

    generate: float = 1.0
    train: float = 1.0
    update_weights: float = 1.0
    transfer: float = 1.0
    #: Seconds a step spends outside the phases priced (advantages, clearing batches,
    #: logging the stats, pausing the rollout): measured, added to every step.
    other_seconds: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            least = 0.0 if f.name == "other_seconds" else math.ulp(0.0)
            if not number or not math.isfinite(value) or value < least:
                what = "seconds, 0 or more" if f.name == "other_seconds" else "a positive number"
                raise ConfigError(
                    f"Calibration.{f.name} must be {what}, got {value!r}",
                    hint="give how many times longer than predicted the phase ran, e.g. 1.2 "
                    "(other_seconds: the seconds a step spends outside them, e.g. 0.5)",
                )

    def factor(self, phase: str) -> float:
        """The factor that scales ``phase``."""
        return float(getattr(self, FACTOR_OF[phase]))

    def to_dict(self) -> dict[str, float]:
        return {f.name: round(float(getattr(self, f.name)), 4) for f in fields(self)}


#: Which factor of :class:`Calibration` scales each phase.
FACTOR_OF: Final[Mapping[str, str]] = {
    "generate": "generate",
    **{phase: "train" for phase in TRAINING_SIDE},
    "update_weights": "update_weights",
    "offload": "transfer",
    "onload": "transfer",
}


@dataclass(frozen=True)
class RLEngine:
    """What the RL step needs of one built engine: its layout, the nodes it runs on and,
    when it is offloaded between uses, the bytes a GPU moves to the host and back."""

    allocation: ModelAllocation
    nodes: tuple[int, ...] = ()
    #: The engine whose GPUs it shares (colocated), or None.
    shares_gpus_with: str | None = None
    #: Bytes a GPU holds that an offload moves to host memory (weights, gradients and
    #: optimizer state of a trainer; weights of a server).
    resident_bytes: float = 0.0
    #: The model it runs when that is not the actor's (a teacher's), when known.
    own_shape: ModelShape | None = None


@dataclass(frozen=True)
class RLInputs:
    """What predicting a checked config's RL step needs besides its plan: the config as
    read, the model's shape, the GPU and the mean response length said (None: assumed).
    The plan keeps them and predicts the step when it is asked for (``Plan.rl_step``),
    so that checking a config (a sweep checks thousands) does not pay for it."""

    run: RunConfig
    shape: ModelShape
    gpu: Hardware
    mean_response_tokens: int | None = None


@dataclass(frozen=True)
class RLStep:
    """One predicted RL step: its phases' seconds, how they add up and what was assumed.

    ``rollout_wait`` is what AReaL's ``timeperf/rollout`` would show: the time the trainer
    waits for a batch. ``tokens_per_s`` counts trained tokens (prompts and responses of the
    batch) per second of step, AReaL's "effective throughput".
    """

    mode: Mode
    phases: Mapping[str, float]
    step_seconds: float
    rollout_wait: float
    bound: Literal["generation", "training"]
    tokens_per_step: int
    generated_tokens: int
    assumptions: Mapping[str, Any] = field(default_factory=dict)
    #: What runs in a step and is not priced, with the reason.
    not_counted: tuple[str, ...] = ()
    calibration: Calibration = field(default_factory=Calibration)
    decode: DecodeThroughput | None = field(default=None, repr=False, compare=False)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "step_seconds": round(self.step_seconds, 3),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "bound": self.bound,
            "rollout_wait": round(self.rollout_wait, 3),
            "phases": {name: round(s, 3) for name, s in self.phases.items()},
            "tokens_per_step": self.tokens_per_step,
            "generated_tokens": self.generated_tokens,
            "assumptions": dict(self.assumptions),
            "not_counted": list(self.not_counted),
            "calibration": self.calibration.to_dict(),
        }


def compose(mode: Mode, phases: Mapping[str, float]) -> tuple[float, float, str]:
    """The step's seconds, the trainer's wait for a batch and what bounds the step, from
    its phases (see the module docstring): the one place the overlap is stated."""
    generate = phases.get("generate", 0.0)
    training = sum(phases.get(p, 0.0) for p in TRAINING_SIDE)
    rest = sum(s for p, s in phases.items() if p != "generate" and p not in TRAINING_SIDE)
    bound = "generation" if generate > training else "training"
    if mode == "asynchronous":
        return max(generate, training) + rest, max(0.0, generate - training), bound
    return generate + training + rest, generate, bound


def mode_of(run: RunConfig, engines: Mapping[str, RLEngine]) -> Mode:
    """How AReaL runs the steps of ``run`` (see the module docstring)."""
    actor, rollout = engines["actor"], engines["rollout"]
    if actor.shares_gpus_with == "rollout" or rollout.shares_gpus_with == "actor":
        return "colocated"
    section = run.rollout
    ahead = section.max_head_offpolicyness if section is not None else 0
    return "asynchronous" if ahead > 0 else "synchronous"


def rl_step(
    run: RunConfig,
    engines: Mapping[str, RLEngine],
    shape: ModelShape,
    *,
    gpu: Hardware,
    n_gpus_per_node: int,
    mean_response_tokens: int | None = None,
    calibration: Calibration | None = None,
) -> RLStep:
    """One RL step of ``run`` with its engines laid out as ``engines`` (by plan name;
    ``actor`` and ``rollout`` needed), on ``gpu``. A ConfigError says why there is none:
    not an RL config, no batch size, no layout that fits the batch."""
    if calibration is not None and not isinstance(calibration, Calibration):
        raise ConfigError(
            f"calibration must be a Calibration or None, got {type(calibration).__name__}",
            hint="e.g. Calibration(generate=1.2, train=0.9)",
        )
    cal = calibration or Calibration()
    if run.trainer != "rl" or "actor" not in engines or "rollout" not in engines:
        raise ConfigError(
            "an RL step needs an RL config with an actor and a rollout",
            hint="give a PPO/GRPO config whose actor and rollout are built",
        )
    work = step_workload(run, mean_response_tokens)
    if not isinstance(work, StepWorkload):
        raise ConfigError(f"no RL step to predict: {work.reason}", hint=f"give {work.fix}")
    mode = mode_of(run, engines)
    n = max(1, n_gpus_per_node)
    phases: dict[str, float] = {}
    not_counted: list[str] = []
    assumptions: dict[str, Any] = {}
    actor_section = run.engines["actor"]
    actor = engines["actor"]

    decode = _decode(run, engines["rollout"], shape, gpu, n, work, mode)
    phases["generate"] = work.generated_tokens / decode.tokens_per_s
    if mode != "asynchronous":
        phases["generate"] = max(
            phases["generate"], _longest_response(run, engines["rollout"], shape, gpu, n, work)
        )

    def timed(section: EngineSection, engine: RLEngine, *, forward: bool) -> float:
        step = _step(run, section, mean_response_tokens)
        model = engine.own_shape or shape
        return step.predict(engine.allocation, model, gpu, n, forward_only=forward).batch_seconds

    critic = engines.get("critic")
    critic_section = run.engines.get("critic")
    if critic is not None and critic_section is not None and critic_section.trainable:
        phases["critic_values"] = timed(critic_section, critic, forward=True)
    ref = engines.get("ref")
    if ref is not None and "ref" in run.engines:
        phases["ref_logp"] = timed(run.engines["ref"], ref, forward=True)
    teacher = engines.get("teacher")
    if teacher is not None:
        phases["teacher_logp"] = _teacher_logp(run, teacher, shape, gpu, n, work, timed)
        if teacher.own_shape is None and _teacher_path(run) not in (None, actor_section.path):
            assumptions["teacher_model"] = "the actor's (the teacher's own is unknown)"
    if actor_section.computes_prox_logp:
        phases["recompute_logp"] = timed(actor_section, actor, forward=True)
    phases["train"] = timed(actor_section, actor, forward=False)
    if "critic_values" in phases and critic is not None and critic_section is not None:
        phases["critic_train"] = timed(critic_section, critic, forward=False)

    update = _update_weights(actor_section, actor, engines["rollout"], shape, gpu)
    if update is None:
        not_counted.append(
            f"update_weights (weight_update_mode={actor_section.weight_update_mode} is not priced)"
        )
    else:
        phases["update_weights"] = update
    moved = _offloaded_bytes(run, engines)
    if moved:
        phases["offload"] = phases["onload"] = moved / (gpu.host_gb_per_s * 1e9)
    phases = {p: s * cal.factor(p) for p, s in phases.items()}
    if cal.other_seconds:
        phases["other"] = cal.other_seconds
    step_s, wait, bound = compose(mode, phases)
    rollout_section = run.engines["rollout"]
    assumptions.update(
        {
            "mean_response_tokens": work.mean_response_tokens,
            "prompt_tokens": work.prompt_tokens,
            "concurrent_sequences": decode.batch * engines["rollout"].allocation.num_instances,
            "max_head_offpolicyness": rollout_section.max_head_offpolicyness,
            "gpu": gpu.name,
        }
    )
    return RLStep(
        mode=mode,
        phases={p: phases[p] for p in PHASES if p in phases},
        step_seconds=step_s,
        rollout_wait=wait,
        bound=bound,  # type: ignore[arg-type]
        tokens_per_step=work.tokens,
        generated_tokens=work.generated_tokens,
        assumptions=assumptions,
        not_counted=tuple(not_counted),
        calibration=cal,
        decode=decode,
    )


def _step(run: RunConfig, section: EngineSection, mean_response_tokens: int | None) -> TrainingStep:
    """The batch an engine trains on or runs a forward pass over (one optimizer step for
    an engine without an optimizer: its pass covers the batch once)."""
    found = training_step(run, section, mean_response_tokens, forward_only=not section.trainable)
    if isinstance(found, str):
        raise ConfigError(f"no RL step to predict: {found}", hint="give the batch's sizes")
    return found


def _decode(
    run: RunConfig,
    rollout: RLEngine,
    shape: ModelShape,
    gpu: Hardware,
    n: int,
    work: StepWorkload,
    mode: Mode,
) -> DecodeThroughput:
    """The rollout's decode throughput with as many sequences at once as AReaL lets it
    run: its rollouts in flight, each of ``n_samples`` sequences, at most the batches
    the staleness cap admits (one when synchronous)."""
    section = run.engines["rollout"]
    ahead = 0 if mode != "asynchronous" else section.max_head_offpolicyness
    cap = (ahead + 1) * section.consumer_batch  # staleness_manager.py:102-112
    rollouts = min(section.rollouts_cap, cap)
    concurrent = min(concurrent_sequences(section, run.workload), rollouts * work.n_samples)
    return decode_throughput(
        rollout.allocation,
        shape,
        gpu=gpu,
        concurrent=max(1, concurrent),
        context_tokens=work.decode_context,
        n_gpus_per_node=n,
        mem_fraction=run.workload.mem_fraction.get(rollout.allocation.backend),
        requests=RequestLengths(work.prompt_tokens, max(1, work.mean_response_tokens)),
    )


def _teacher_path(run: RunConfig) -> object:
    """The teacher's model as the config names it (``teacher.path``, else its section's)."""
    if run.teacher is not None and run.teacher.path:
        return run.teacher.path
    section = run.engines.get("teacher")
    return None if section is None else section.path


def _teacher_logp(
    run: RunConfig,
    teacher: RLEngine,
    shape: ModelShape,
    gpu: Hardware,
    n: int,
    work: StepWorkload,
    timed: Callable[..., float],
) -> float:
    """The teacher's log-probabilities of the batch (``rl_trainer.py:748-766``): a
    forward pass of a training teacher, or a prefill of every trajectory spread over an
    inference teacher's servers (``RolloutController.compute_logp``,
    ``areal/infra/controller/rollout_controller.py:1073-1110``)."""
    if not teacher.allocation.is_inference:
        return timed(run.engines["teacher"], teacher, forward=True)
    return prefill_seconds(
        teacher.allocation,
        teacher.own_shape or shape,
        gpu=gpu,
        sequences=work.sequences,
        sequence_tokens=max(1, work.prompt_tokens + work.mean_response_tokens),
        n_gpus_per_node=n,
    )


def _longest_response(
    run: RunConfig, rollout: RLEngine, shape: ModelShape, gpu: Hardware, n: int, work: StepWorkload
) -> float:
    """The least time the batch's longest response (``max_new_tokens``) takes: as many
    decode steps, each at least as long as one with a single sequence an instance. A
    batch that must finish before training (synchronous, colocated) waits for it."""
    alone = decode_throughput(
        rollout.allocation,
        shape,
        gpu=gpu,
        concurrent=rollout.allocation.num_instances,
        context_tokens=work.decode_context,
        n_gpus_per_node=n,
        mem_fraction=run.workload.mem_fraction.get(rollout.allocation.backend),
    )
    return work.max_new_tokens * alone.step_s


def _update_weights(
    actor_section: EngineSection,
    actor: RLEngine,
    rollout: RLEngine,
    shape: ModelShape,
    gpu: Hardware,
) -> float | None:
    """Seconds of one weight update over NCCL (``weight_update_mode: xccl``, AReaL's
    default): every bf16 weight gathered on the trainer's heads and broadcast to every
    rollout GPU (``areal/engine/fsdp_engine.py:1596-1693``). Megatron broadcasts each
    pipeline stage's share from its own head at once (one group a stage,
    ``areal/engine/megatron_engine.py:470-471``). A pipelined broadcast moves the bytes
    once over the slowest link: the network when the rollout is on other nodes. None for
    other modes (disk: the file system's speed is unknown)."""
    if actor_section.weight_update_mode != "xccl":
        return None
    p = actor.allocation.parallel
    stage_bytes = WEIGHT_BYTES * parameter_count(shape) / p.pp_size
    one_node = len(set(actor.nodes) | set(rollout.nodes)) <= 1
    link = gpu.intra_node_gb_per_s if one_node else gpu.inter_node_gb_per_s
    broadcast = stage_bytes / (link * 1e9)
    # The gather before it: FSDP all-gathers each parameter over its data-parallel
    # group, Megatron over its tensor-parallel group (within a node).
    group = p.dp_size if actor.allocation.backend == "fsdp" else p.tp_size
    spans = len(set(actor.nodes)) > 1 and actor.allocation.backend == "fsdp"
    gather_link = gpu.inter_node_gb_per_s if spans else gpu.intra_node_gb_per_s
    gather = stage_bytes * (group - 1) / group / (gather_link * 1e9)
    return broadcast + gather


def _offloaded_bytes(run: RunConfig, engines: Mapping[str, RLEngine]) -> float:
    """Bytes one GPU moves to the host in a step's offloads (as many back in its onloads):
    those of every engine that leaves its GPUs between phases (the actor and the rollout
    when they share GPUs, and every engine with an offload flag): its weights and, for a
    trainer, gradients and optimizer state, copied by torch_memory_saver."""
    return sum(e.resident_bytes for name, e in engines.items() if run.leaves_gpus(name))

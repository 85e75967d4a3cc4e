"""Which layout to run: every valid layout ranked by predicted step time, and how to
split a cluster between the rollout and the actor.

:func:`rank_layouts` lists the layouts of :func:`areal_conf.layouts`, predicts each one's
step time (:func:`areal_conf.perf.step_time.step_time`) and memory per GPU
(:func:`areal_conf.perf.memory.estimate`), and sorts them: the layouts that fit first, fastest
first, then those that do not fit. :func:`rl_split` finds the number of GPUs for the
rollout and for the actor at which generation keeps up with training.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Unpack

from areal_conf.arguments import (
    choice,
    flag,
    optional_whole,
    positive,
    shown,
    text,
    whole,
)
from areal_conf.errors import AllocationError, ConfigError
from areal_conf.model.hardware import Hardware, hardware
from areal_conf.model.shape import ModelShape, shape_of
from areal_conf.perf.decode import (
    DecodeLoad,
    DecodeThroughput,
    RequestLengths,
    decode_throughput,
)
from areal_conf.perf.memory import MemoryEstimate, estimate
from areal_conf.perf.pricing import gpus_per_node
from areal_conf.perf.rl_step import compose
from areal_conf.perf.speed import TrainingStep, memory_recompute, recomputing
from areal_conf.perf.step_time import RECOMPUTE, RECOMPUTE_HINT, Recompute, StepTime, step_time
from areal_conf.perf.workload import StepWorkload, rl_workload
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import MAX_SIZE
from areal_conf.spec.layouts import layouts


@dataclass(frozen=True)
class RankedLayout:
    """One layout with its predicted step time and memory per GPU."""

    spec: str
    step: StepTime  # one optimizer step
    memory: MemoryEstimate
    seconds: float  # the training step: every optimizer step of the batch

    @property
    def fits(self) -> bool:
        return self.memory.fits


def rank_layouts(
    backend: str,
    gpus: int,
    model: Mapping[str, Any],
    *,
    gpu: str | Hardware,
    tokens_per_step: int,
    tokens_per_microbatch: int,
    n_gpus_per_node: int = 8,
    recompute: Recompute = "none",
    max_tp: int | None = None,
    gpu_memory_gb: float | None = None,
    fits_only: bool = False,
    top: int | None = None,
    **knobs: Any,
) -> list[RankedLayout]:
    """Every valid ``backend`` layout on ``gpus`` GPUs, fastest first.

    ``tokens_per_step`` are the tokens of one optimizer step; a data-parallel rank's
    micro-batch holds at most ``tokens_per_microbatch`` of them (AReaL's
    ``mb_spec.max_tokens_per_mb``) and at most its share of the step.

    Layouts whose memory per GPU fits ``gpu_memory_gb`` (default: the GPU's) come first,
    by predicted step time; those that do not fit follow, also by step time, unless
    ``fits_only`` leaves them out. ``top`` keeps the first ``top``. ``max_tp`` caps tp and
    etp (default: ``n_gpus_per_node``, tensor parallelism within a node). ``recompute``
    ``"selective"`` applies to Megatron and ``"op"`` to Archon; the other backends
    recompute whole layers, as AReaL's do. Other ``knobs`` go to
    :func:`areal_conf.perf.step_time.step_time`.
    """
    whole("tokens_per_step", tokens_per_step, example="e.g. tokens_per_step=1_048_576")
    whole("tokens_per_microbatch", tokens_per_microbatch, example="e.g. 16384")
    _recompute(recompute)
    _step_time_knobs(knobs)
    step = TrainingStep(
        tokens_per_batch=tokens_per_step,
        optimizer_steps=1,
        tokens_per_microbatch=tokens_per_microbatch,
        knobs=knobs,
        recompute_by_backend=recomputing(recompute),
    )
    return rank_training(
        step,
        backend,
        gpus,
        model,
        gpu=gpu,
        n_gpus_per_node=n_gpus_per_node,
        max_tp=max_tp,
        gpu_memory_gb=gpu_memory_gb,
        memory_knobs={"recompute": memory_recompute(step.recompute(backend))},
        fits_only=fits_only,
        top=top,
    )


#: The knobs of :func:`step_time` that :func:`rank_layouts` passes on (the others it
#: sets itself).
_PASSED_ON: Final = tuple(
    name
    for name in inspect.signature(step_time).parameters
    if name
    not in (
        "allocation_or_spec",
        "model",
        "gpu",
        "n_gpus_per_node",
        "tokens_per_step",
        "tokens_per_microbatch",
        "recompute",
        "forward_only",
    )
)


def _step_time_knobs(knobs: Mapping[str, Any]) -> None:
    """Refuse a knob :func:`step_time` does not take (its values it checks itself)."""
    for name in knobs:
        choice(
            "a knob of rank_layouts",
            name,
            _PASSED_ON,
            hint="the knobs are step_time's: " + ", ".join(_PASSED_ON),
        )


def _recompute(recompute: object) -> Recompute:
    return choice(  # type: ignore[return-value]
        "recompute",
        recompute,
        RECOMPUTE,
        hint=RECOMPUTE_HINT,
    )


def rank_training(
    step: TrainingStep,
    backend: str,
    gpus: int,
    model: Mapping[str, Any],
    *,
    gpu: str | Hardware,
    n_gpus_per_node: int = 8,
    max_tp: int | None = None,
    gpu_memory_gb: float | None = None,
    memory_knobs: Mapping[str, Any] | None = None,
    fits_only: bool = False,
    top: int | None = None,
) -> list[RankedLayout]:
    """:func:`rank_layouts` for one training step of a config's engine (its batch, its
    micro-batches, its optimizer steps) and the memory knobs of its config."""
    gpu_ = hardware(gpu)
    optional_whole("top", top, example="how many of the fastest layouts to keep, e.g. 5")
    gpus_per_node(n_gpus_per_node)
    flag("fits_only", fits_only)
    cap = n_gpus_per_node if max_tp is None else max_tp
    specs = layouts(backend, gpus, model=model, max_tp=cap)
    shape = shape_of(model)
    memory_gb = (
        gpu_.hbm_gb
        if gpu_memory_gb is None
        else positive("gpu_memory_gb", gpu_memory_gb, example="e.g. 80 (H100), 141 (H200)")
    )
    knobs = {**(memory_knobs or {}), "gpu_memory_gb": memory_gb}
    ranked: list[RankedLayout] = []
    for spec in specs:
        alloc = ModelAllocation.from_str(spec)
        if step.tokens_per_optimizer_step < alloc.parallel.dp_size:
            continue  # a data-parallel rank would get no token
        predicted = step.predict(alloc, shape, gpu_, n_gpus_per_node)
        microbatch = min(
            step.tokens_per_microbatch, step.tokens_per_optimizer_step // alloc.parallel.dp_size
        )
        memory = estimate(alloc, shape, **{**knobs, "tokens_per_microbatch": microbatch})
        ranked.append(RankedLayout(spec, predicted, memory, predicted.batch_seconds))
    ranked.sort(key=lambda r: (not r.fits, r.seconds))
    if fits_only:
        ranked = [r for r in ranked if r.fits]
    return ranked if top is None else ranked[:top]


# -- the rollout / actor split -------------------------------------------------------------


@dataclass(frozen=True)
class Critic:
    """A PPO critic, as :func:`rl_split` counts it: each step it runs a values pass over
    the batch (``compute_values``) and trains on it in ``ppo_n_minibatches`` optimizer
    steps (AReaL's ``PPOCriticConfig``, default 4), in turn with the actor
    (``areal/trainer/rl_trainer.py``: the critic's values at line 723, the actor's update
    at 826, the critic's at 851; ``ppo/critic.py:61-66``).

    ``layout`` None: the critic shares the actor's GPUs (colocated), so each split gives
    it its fastest layout of ``backend`` that fits there; a layout: it has GPUs of its own
    outside the split, and the same time in every split. ``tokens_per_microbatch`` None:
    the actor's."""

    backend: str = "fsdp"
    ppo_n_minibatches: int = 4
    tokens_per_microbatch: int | None = None
    recompute: Recompute = "none"
    layout: str | None = None


def _check_critic(critic: object) -> None:
    if not isinstance(critic, Critic):
        raise ConfigError(
            f"critic must be a Critic or None, got {shown(critic)}",
            hint="give e.g. critic=Critic(backend='fsdp', ppo_n_minibatches=4)",
        )
    text("critic.backend", critic.backend, example='e.g. "fsdp"')
    whole("critic.ppo_n_minibatches", critic.ppo_n_minibatches, example="e.g. 4", maximum=MAX_SIZE)
    optional_whole(
        "critic.tokens_per_microbatch", critic.tokens_per_microbatch, example="e.g. 16384"
    )
    _recompute(critic.recompute)
    if critic.layout is not None:
        text("critic.layout", critic.layout, example='e.g. "fsdp:d8"')


@dataclass(frozen=True)
class SplitOption:
    """One way to split the GPUs: the best layout of each engine and their times for one
    RL step (a batch generated, then trained on)."""

    rollout_gpus: int
    actor_gpus: int
    rollout: str
    actor: str
    generate_s: float
    train_s: float  # the actor's training, and the critic's values pass and training
    step_s: float  # the longer of the two (asynchronous) or their sum (synchronous)
    decode: DecodeThroughput = field(repr=False, compare=False)
    actor_step: StepTime = field(repr=False, compare=False)
    critic: str | None = None  # the critic's layout (None: no critic counted)
    critic_s: float = 0.0  # the critic's part of train_s


@dataclass(frozen=True)
class RLSplit:
    """The split at which generation keeps up with training, and every split tried."""

    best: SplitOption
    options: tuple[SplitOption, ...]
    assumptions: Mapping[str, Any]


#: The most GPUs :func:`rl_split` splits: 2,048 nodes of 8, as many as the largest
#: published training job (16,384 H100s for Llama 3 405B). Every split ranks every
#: layout of both engines, so the time grows with the GPUs (seconds at this limit).
MAX_SPLIT_GPUS: Final = 16_384


def rl_split(
    model: ModelShape | Mapping[str, Any],
    *,
    gpu: str | Hardware,
    total_gpus: int,
    batch_size: int,
    n_samples: int,
    max_new_tokens: int,
    prompt_tokens: int,
    mean_response_tokens: int | None = None,
    n_gpus_per_node: int = 8,
    rollout_backend: str = "sglang",
    actor_backend: str = "fsdp",
    tokens_per_microbatch: int | None = None,
    recompute: Recompute = "none",
    ppo_n_minibatches: int = 1,
    asynchronous: bool = True,
    max_concurrent_rollouts: int | None = None,
    critic: Critic | None = None,
) -> RLSplit:
    """How many of ``total_gpus`` GPUs the rollout and the actor should get.

    One RL step (:func:`areal_conf.perf.workload.rl_workload`) generates ``batch_size ×
    n_samples`` responses of ``mean_response_tokens`` each (default: half of
    ``max_new_tokens``), after prompts of ``prompt_tokens``, and trains the actor on them
    in ``ppo_n_minibatches`` optimizer steps. For every split in whole nodes (single GPUs
    on one node) the rollout gets its fastest layout by decode throughput, the actor its
    fastest layout that fits by step time; the step takes the longer of generation and
    training when they overlap (AReaL's asynchronous training, ``asynchronous``), their
    sum otherwise. The best split is the shortest step. A ``critic`` (:class:`Critic`) adds
    its values pass and its training to the training side. Prefill, ref and teacher
    forward passes and weight updates are not counted. ``max_concurrent_rollouts`` is
    AReaL's: rollouts at once, each the ``n_samples`` responses of one prompt (default:
    the whole batch at once).
    """
    gpu_ = hardware(gpu)
    whole(
        "total_gpus",
        total_gpus,
        example="e.g. 64",
        maximum=MAX_SPLIT_GPUS,
        why="every split ranks every layout of both engines; a split of more GPUs takes minutes",
    )
    whole("batch_size", batch_size, example="e.g. train_dataset.batch_size, 256")
    whole("n_samples", n_samples, example="e.g. gconfig.n_samples, 8")
    whole("max_new_tokens", max_new_tokens, example="e.g. gconfig.max_new_tokens, 8192")
    whole("prompt_tokens", prompt_tokens, example="e.g. 1024", minimum=0)
    whole("ppo_n_minibatches", ppo_n_minibatches, example="e.g. 4", maximum=MAX_SIZE)
    optional_whole(
        "mean_response_tokens", mean_response_tokens, example="e.g. half of max_new_tokens"
    )
    gpus_per_node(n_gpus_per_node)
    for name, value in (("rollout_backend", rollout_backend), ("actor_backend", actor_backend)):
        text(name, value, example='e.g. "sglang" or "fsdp"')
    optional_whole("tokens_per_microbatch", tokens_per_microbatch, example="e.g. 16384, or None")
    _recompute(recompute)
    flag("asynchronous", asynchronous)
    optional_whole("max_concurrent_rollouts", max_concurrent_rollouts, example="e.g. 256, or None")
    if critic is not None:
        _check_critic(critic)
    step = n_gpus_per_node if total_gpus >= 2 * n_gpus_per_node else 1
    if total_gpus < 2 or total_gpus % step:
        raise ConfigError(
            f"{total_gpus} GPUs cannot be split between a rollout and an actor"
            + (f" in whole nodes of {n_gpus_per_node}" if step > 1 else ""),
            hint="give at least two GPUs, in whole nodes when there are more than one",
        )
    shape = shape_of(model)
    mapping = as_model_mapping(shape)
    work = rl_workload(
        batch_size=batch_size,
        n_samples=n_samples,
        max_new_tokens=max_new_tokens,
        prompt_tokens=prompt_tokens,
        mean_response_tokens=mean_response_tokens,
    )
    # AReaL's rollouts are groups: each generates the n_samples responses of one prompt
    rollouts = batch_size if max_concurrent_rollouts is None else max_concurrent_rollouts
    concurrent = rollouts * n_samples
    microbatch = work.microbatch(tokens_per_microbatch)
    actor_step = _rl_step(work, ppo_n_minibatches, microbatch, recompute)
    critic_step = (
        None
        if critic is None
        else _rl_step(
            work,
            critic.ppo_n_minibatches,
            work.microbatch(critic.tokens_per_microbatch or tokens_per_microbatch),
            critic.recompute,
        )
    )
    options: list[SplitOption] = []
    for rollout_gpus in range(step, total_gpus, step):
        actor_gpus = total_gpus - rollout_gpus
        fastest = rank_decode(
            rollout_backend,
            rollout_gpus,
            shape,
            gpu=gpu_,
            concurrent=concurrent,
            context_tokens=work.decode_context,
            n_gpus_per_node=n_gpus_per_node,
            requests=RequestLengths(work.prompt_tokens, max(1, work.mean_response_tokens)),
            top=1,
        )
        if not fastest:
            continue
        decode = fastest[0]
        trains = _fastest(actor_step, actor_backend, actor_gpus, mapping, gpu_, n_gpus_per_node)
        if trains is None:
            continue
        critic_layout, critic_s = None, 0.0
        if critic is not None and critic_step is not None:
            counted = _critic_time(
                critic, critic_step, actor_gpus, shape, mapping, gpu_, n_gpus_per_node
            )
            if counted is None:
                continue
            critic_layout, critic_s = counted
        generate_s = work.generated_tokens / decode[1].tokens_per_s
        train_s = trains.seconds + critic_s
        options.append(
            SplitOption(
                rollout_gpus,
                actor_gpus,
                decode[0],
                trains.spec,
                generate_s,
                train_s,
                compose(
                    "asynchronous" if asynchronous else "synchronous",
                    {"generate": generate_s, "train": train_s},
                )[0],
                decode[1],
                trains.step,
                critic_layout,
                critic_s,
            )
        )
    if not options:
        trainers = f"an actor layout ({actor_backend})"
        if critic is not None and critic.layout is None:
            trainers += f" and a critic layout ({critic.backend})"
        raise ConfigError(
            f"no split of {total_gpus} GPUs has a rollout layout ({rollout_backend}) whose KV "
            f"cache holds a sequence and {trainers} fitting {gpu_.name}",
            hint="more GPUs, a GPU with more memory, shorter sequences, or "
            "recompute='full' (gradient_checkpointing)",
        )
    best = min(options, key=lambda o: o.step_s)
    if critic is None:
        counted_text = (
            "rollout decoding with its prompts' prefill and the actor's training; not ref, "
            "critic or weight updates"
        )
    else:
        where = "on the actor's GPUs" if critic.layout is None else f"on {critic.layout}"
        counted_text = (
            "rollout decoding with its prompts' prefill, the actor's training and the "
            f"critic's values pass and training ({where}); not ref or weight updates"
        )
    assumptions = {
        "mean_response_tokens": work.mean_response_tokens,
        "prompt_tokens": work.prompt_tokens,
        "tokens_per_microbatch": microbatch,
        "concurrent_sequences": concurrent,
        "asynchronous": asynchronous,
        "gpu": gpu_.name,
        "counted": counted_text,
    }
    return RLSplit(best, tuple(options), assumptions)


def _rl_step(
    work: StepWorkload, ppo_n_minibatches: int, microbatch: int, recompute: Recompute
) -> TrainingStep:
    """The training step of an RL engine (actor or critic) on ``work``."""
    return TrainingStep(
        tokens_per_batch=work.tokens,
        optimizer_steps=work.optimizer_steps(ppo_n_minibatches),
        tokens_per_microbatch=microbatch,
        workload=work,
        recompute_by_backend=recomputing(recompute),
    )


def _critic_time(
    critic: Critic,
    step: TrainingStep,
    actor_gpus: int,
    shape: ModelShape,
    mapping: Mapping[str, Any],
    gpu: Hardware,
    n_gpus_per_node: int,
) -> tuple[str, float] | None:
    """The critic's layout and seconds a step (values pass and training): on its own
    layout, or the fastest that fits on the actor's ``actor_gpus`` (None: none fits)."""
    if critic.layout is not None:
        spec = critic.layout
    else:
        fastest = _fastest(step, critic.backend, actor_gpus, mapping, gpu, n_gpus_per_node)
        if fastest is None:
            return None
        spec = fastest.spec
    train = step.predict(spec, shape, gpu, n_gpus_per_node)
    forward = step.predict(spec, shape, gpu, n_gpus_per_node, forward_only=True)
    return spec, train.batch_seconds + forward.batch_seconds


def rank_decode(
    backend: str,
    gpus: int,
    model: ModelShape | Mapping[str, Any],
    *,
    top: int | None = None,
    **load: Unpack[DecodeLoad],
) -> list[tuple[str, DecodeThroughput]]:
    """Every valid inference layout on ``gpus`` GPUs whose KV cache holds a sequence of
    ``context_tokens``, by predicted decode throughput, highest first; tp at most
    ``n_gpus_per_node``; ``load``: the keyword arguments of
    :func:`areal_conf.perf.decode.decode_throughput`."""
    shape = shape_of(model)
    found: list[tuple[str, DecodeThroughput]] = []
    max_tp = load.get("n_gpus_per_node", 8)
    for spec in layouts(backend, gpus, model=as_model_mapping(shape), max_tp=max_tp):
        try:
            rate = decode_throughput(spec, shape, **load)
        except AllocationError:  # its KV cache does not hold one sequence
            continue
        found.append((spec, rate))
    found.sort(key=lambda item: -item[1].tokens_per_s)
    return found if top is None else found[:top]


def _fastest(
    step: TrainingStep,
    backend: str,
    gpus: int,
    mapping: Mapping[str, Any],
    gpu: Hardware,
    n_gpus_per_node: int,
) -> RankedLayout | None:
    """The fastest ``backend`` layout on ``gpus`` GPUs that fits (None: none fits)."""
    ranked = rank_training(
        step,
        backend,
        gpus,
        mapping,
        gpu=gpu,
        n_gpus_per_node=n_gpus_per_node,
        memory_knobs={"recompute": memory_recompute(step.recompute(backend))},
        fits_only=True,
        top=1,
    )
    return ranked[0] if ranked else None


def as_model_mapping(shape: ModelShape) -> dict[str, Any]:
    """The shape as the ``model`` mapping the layout rules read."""
    return {
        "num_layers": shape.num_layers,
        "hidden_size": shape.hidden_size,
        "num_attention_heads": shape.num_attention_heads,
        "num_kv_heads": shape.num_kv_heads,
        "head_dim": shape.head_dim,
        "ffn_hidden_size": shape.ffn_hidden_size,
        "vocab_size": shape.vocab_size,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "num_experts": shape.num_experts,
        "moe_ffn_hidden_size": shape.moe_ffn_hidden_size or None,
        "moe_shared_expert_ffn_hidden_size": shape.moe_shared_expert_ffn_hidden_size or None,
        "moe_router_topk": shape.moe_router_topk or None,
        "max_seq_len": shape.max_seq_len,
    }

"""The predicted time of a config's training step, engine by engine: what the plan's
``s/step`` column, the layouts sweeper's ``rank=step_time`` and ``suggest`` read.

One training step of AReaL trains an engine on one batch, whose sequences, lengths and
optimizer steps depend on the trainer (RL, SFT, RW, DPO): :mod:`areal_conf.perf.workload`.
Micro-batches hold ``mb_spec.max_tokens_per_mb`` tokens (by default one longest
sequence). Recomputation follows ``gradient_checkpointing`` (Megatron:
``recompute_granularity``; Archon: ``ac_mode``). Only engines with an optimizer (actor,
critic) get a time;
:meth:`TrainingStep.predict` with ``forward_only`` prices a forward pass over the same
batch (the PPO critic's values pass). A value head (critic, reward model) is priced as the language
model's output layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, cast

from areal_conf.config.run_config import EngineSection, RunConfig
from areal_conf.model.hardware import Hardware, hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.step_time import Recompute, StepTime, step_time
from areal_conf.perf.workload import NoWorkload, StepWorkload, step_workload
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.backends import TRAINING_BACKENDS

#: The GPU the step time assumes when none is named (``--gpu``, ``AREAL_CONF_GPU``).
DEFAULT_GPU: Final = "h100"


@dataclass(frozen=True)
class TrainingStep:
    """What one training step of an engine trains on, as the step-time model takes it."""

    tokens_per_batch: int
    optimizer_steps: int
    tokens_per_microbatch: int
    #: What the batch is (None: tokens given directly, as ``layouts --rank`` gives them).
    workload: StepWorkload | None = None
    knobs: Mapping[str, Any] = field(default_factory=dict)
    #: What the backward recomputes, by training backend (absent: nothing).
    recompute_by_backend: Mapping[str, str] = field(default_factory=dict)
    #: Keys of the engine that change its speed and are not priced (said with the step).
    unpriced: tuple[str, ...] = ()
    #: Knobs of :func:`step_time` for a Megatron layout only (FP8 training: AReaL's other
    #: backends do not read ``megatron.*``).
    megatron_knobs: Mapping[str, Any] = field(default_factory=dict)

    def recompute(self, backend: str) -> Recompute:
        # step_time checks the value
        return cast("Recompute", self.recompute_by_backend.get(backend, "none"))

    @property
    def tokens_per_optimizer_step(self) -> int:
        return max(1, self.tokens_per_batch // self.optimizer_steps)

    def predict(
        self,
        allocation: ModelAllocation | str,
        shape: ModelShape | Mapping[str, Any],
        gpu: str | Hardware,
        n_gpus_per_node: int = 8,
        *,
        forward_only: bool = False,
    ) -> StepTime:
        """One optimizer step of ``allocation`` (a rank's micro-batch at most its share),
        its ``batch_seconds`` every optimizer step of the batch. With ``forward_only``, one
        forward pass over the whole batch in the same micro-batches (a values or
        log-probability pass: AReaL's ``compute_values``, ``compute_logp``)."""
        alloc = ModelAllocation.from_str(allocation) if isinstance(allocation, str) else allocation
        tokens = self.tokens_per_batch if forward_only else self.tokens_per_optimizer_step
        share = tokens // alloc.parallel.dp_size
        knobs = self.knobs
        if self.megatron_knobs and alloc.backend == "megatron":
            knobs = {**knobs, **self.megatron_knobs}
        one = step_time(
            alloc,
            shape,
            gpu=gpu,
            n_gpus_per_node=n_gpus_per_node,
            tokens_per_step=tokens,
            tokens_per_microbatch=min(self.tokens_per_microbatch, max(1, share)),
            recompute=self.recompute(alloc.backend),
            forward_only=forward_only,
            **knobs,
        )
        return replace(one, optimizer_steps=1 if forward_only else self.optimizer_steps)

    def batch_text(self, steps: str | None = None) -> str:
        """What the step trains on: the workload's assumptions, the tokens and the
        optimizer steps (``steps``: in other words, e.g. of several engines)."""
        steps = steps or _steps_text(self.optimizer_steps)
        tokens = f"{self.tokens_per_batch:,} tokens a step in {steps}"
        return tokens if self.workload is None else f"{self.workload.describe()}; {tokens}"

    def describe(self, gpu: str) -> str:
        return describe_steps({"": self}, gpu)


def describe_steps(steps: Mapping[str, TrainingStep], gpu: str) -> str:
    """The plan's ``s/step`` line for the training steps of several engines of one config
    (one batch): their optimizer steps by engine when they differ (the actor's and the
    critic's ``ppo_n_minibatches``), and what none of them prices."""
    first = next(iter(steps.values()))
    counts = {name: step.optimizer_steps for name, step in steps.items()}
    unpriced = [key for step in steps.values() for key in step.unpriced]
    by_engine = None
    if len(set(counts.values())) > 1:
        by_engine = ", ".join(f"{_steps_text(n)} ({name})" for name, n in counts.items())
    left_out = f"; not modelled: {', '.join(unpriced)}" if unpriced else ""
    return f"s/step: predicted on {gpu}, {first.batch_text(by_engine)}{left_out}"


def _steps_text(n: int) -> str:
    return f"{n} optimizer step{'s' if n != 1 else ''}"


def training_step(
    run: RunConfig,
    engine: EngineSection,
    mean_response_tokens: int | None = None,
    *,
    forward_only: bool = False,
) -> TrainingStep | str:
    """The training step of ``engine`` in ``run``, or a sentence saying why there is none
    (no batch size, no sequence length, an engine without an optimizer). With
    ``forward_only`` an engine without an optimizer has one too: the batch its forward
    pass covers (a ref's log-probabilities)."""
    if not engine.trainable and not forward_only:
        return f"{engine.name} has no optimizer: it only runs forward passes"
    work = step_workload(run, mean_response_tokens)
    if isinstance(work, NoWorkload):
        return work.reason
    knobs: dict[str, Any] = {
        "flash_attention": "flash" in engine.attn_impl,
        "distributed_optimizer": engine.distributed_optimizer,
        "grad_reduce_dtype": engine.grad_reduce_dtype,
        # mbridge (AReaL's default) leaves Megatron-Core's default, off; megatron-bridge
        # turns it on, except for LoRA.
        "gradient_accumulation_fusion": engine.bridge_type == "megatron-bridge"
        and not engine.use_lora,
        # AReaL's defaults off; LoRA turns both off (areal/models/mcore/registry.py)
        "overlap_grad_reduce": engine.overlap_grad_reduce and not engine.use_lora,
        "overlap_param_gather": engine.overlap_param_gather and not engine.use_lora,
        "virtual_stages": engine.virtual_stages,
        "dedup_dispatch": engine.dedup_dispatch,
    }
    return TrainingStep(
        tokens_per_batch=work.tokens,
        optimizer_steps=work.optimizer_steps(engine.ppo_n_minibatches) if engine.trainable else 1,
        tokens_per_microbatch=work.microbatch(engine.tokens_per_mb),
        workload=work,
        knobs=knobs,
        recompute_by_backend={backend: engine.recompute(backend) for backend in TRAINING_BACKENDS},
        unpriced=engine.unpriced,
        megatron_knobs=(
            {"fp8": engine.fp8_recipe, "fp8_param_gather": engine.fp8_param_gather}
            if engine.fp8_recipe
            else {}
        ),
    )


def recomputing(mode: Recompute) -> dict[str, Recompute]:
    """One recomputation as each training backend runs it: ``"selective"`` on Megatron,
    ``"op"`` on Archon, whole layers on the others (AReaL's choices); nothing for
    ``"none"``."""
    if mode == "none":
        return {}
    native = {"selective": "megatron", "op": "archon"}.get(mode)
    return {b: mode if mode == "full" or b == native else "full" for b in TRAINING_BACKENDS}


def memory_recompute(mode: str) -> str:
    """The memory estimate's ``recompute`` for a step's: Megatron's selective
    recomputation drops only the attention scores, which flash attention does not keep."""
    return "none" if mode == "selective" else mode


def gpu_for_speed(name: str | None) -> tuple[Hardware, str]:
    """The GPU to predict on and how to say it: the one named, else H100 (assumed)."""
    if name:
        return hardware(name), name
    return hardware(DEFAULT_GPU), f"{DEFAULT_GPU} (assumed; --gpu NAME or AREAL_CONF_GPU)"

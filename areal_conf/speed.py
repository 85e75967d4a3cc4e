"""The predicted time of a config's training step, engine by engine: what the plan's
``s/step`` column, the layouts sweeper's ``rank=step_time`` and ``suggest`` read.

One training step of AReaL trains an engine on one batch: ``train_dataset.batch_size``
prompts × ``gconfig.n_samples`` responses, each of the prompt length
(``train_dataset.max_length``) plus a mean response length (by default half of
``gconfig.max_new_tokens``; ``AREAL_CONF_MEAN_RESPONSE_TOKENS`` or
``--mean-response-tokens`` to say otherwise), in ``ppo_n_minibatches`` optimizer steps.
Micro-batches hold ``mb_spec.max_tokens_per_mb`` tokens (by default one full sequence).
Recomputation follows ``gradient_checkpointing`` (Megatron: ``recompute_granularity``).
Only engines with an optimizer (actor, critic) get a time: forward-only engines are not
modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from areal_conf.allocation import ModelAllocation
from areal_conf.hardware import Hardware, hardware
from areal_conf.model_shape import ModelShape
from areal_conf.performance import StepTime, step_time
from areal_conf.reading import EngineSection, RunConfig

#: The GPU the step time assumes when none is named (``--gpu``, ``AREAL_CONF_GPU``).
DEFAULT_GPU: Final = "h100"


@dataclass(frozen=True)
class TrainingStep:
    """What one training step of an engine trains on, as the step-time model takes it."""

    tokens_per_batch: int
    optimizer_steps: int
    tokens_per_microbatch: int
    mean_response_tokens: int
    knobs: Mapping[str, Any] = field(default_factory=dict)
    #: gradient_checkpointing's granularity (None: off); only Megatron recomputes
    #: selectively, every other backend recomputes whole layers.
    recompute_granularity: str | None = None

    def recompute(self, backend: str) -> str:
        if self.recompute_granularity is None:
            return "none"
        if backend == "megatron" and self.recompute_granularity == "selective":
            return "selective"
        return "full"

    @property
    def tokens_per_optimizer_step(self) -> int:
        return max(1, self.tokens_per_batch // self.optimizer_steps)

    def predict(
        self,
        allocation: ModelAllocation | str,
        shape: ModelShape | Mapping[str, Any],
        gpu: str | Hardware,
        n_gpus_per_node: int = 8,
    ) -> StepTime:
        """One optimizer step of ``allocation`` (a rank's micro-batch at most its share)."""
        alloc = ModelAllocation.from_str(allocation) if isinstance(allocation, str) else allocation
        per_step = self.tokens_per_optimizer_step
        share = per_step // alloc.parallel.dp_size
        return step_time(
            alloc,
            shape,
            gpu=gpu,
            n_gpus_per_node=n_gpus_per_node,
            tokens_per_step=per_step,
            tokens_per_microbatch=min(self.tokens_per_microbatch, max(1, share)),
            recompute=self.recompute(alloc.backend),  # type: ignore[arg-type]
            **self.knobs,
        )

    def seconds(
        self,
        allocation: ModelAllocation | str,
        shape: ModelShape | Mapping[str, Any],
        gpu: str | Hardware,
        n_gpus_per_node: int = 8,
    ) -> float:
        """Seconds of the whole training step: every optimizer step of the batch."""
        return self.optimizer_steps * self.predict(allocation, shape, gpu, n_gpus_per_node).total

    def describe(self, gpu: str) -> str:
        return (
            f"s/step: predicted on {gpu}, {self.tokens_per_batch:,} tokens a step (mean "
            f"response {self.mean_response_tokens:,} tokens) in {self.optimizer_steps} "
            f"optimizer step{'s' if self.optimizer_steps != 1 else ''}"
        )


def training_step(
    run: RunConfig, engine: EngineSection, mean_response_tokens: int | None = None
) -> TrainingStep | str:
    """The training step of ``engine`` in ``run``, or a sentence saying why there is none
    (no batch size, an engine without an optimizer)."""
    workload = run.workload
    if not engine.trainable:
        return f"{engine.name} has no optimizer: it only runs forward passes"
    if workload.batch_size is None:
        return "no train_dataset.batch_size"
    response = mean_response_tokens or max(1, workload.max_new_tokens // 2)
    sequence = workload.prompt_len + response
    tokens = workload.batch_size * workload.n_samples * sequence
    knobs: dict[str, Any] = {
        "flash_attention": "flash" in engine.attn_impl,
        "distributed_optimizer": engine.distributed_optimizer,
        "grad_reduce_dtype": engine.grad_reduce_dtype,
        # mbridge (AReaL's default) leaves Megatron-Core's default, off; megatron-bridge
        # turns it on, except for LoRA.
        "gradient_accumulation_fusion": engine.bridge_type == "megatron-bridge"
        and not engine.use_lora,
    }
    microbatch = engine.tokens_per_mb or workload.prompt_len + workload.max_new_tokens
    return TrainingStep(
        tokens_per_batch=tokens,
        optimizer_steps=max(1, engine.ppo_n_minibatches),
        tokens_per_microbatch=max(1, microbatch),
        mean_response_tokens=response,
        knobs=knobs,
        recompute_granularity=(
            engine.recompute_granularity if engine.gradient_checkpointing else None
        ),
    )


def gpu_for_speed(name: str | None) -> tuple[Hardware, str]:
    """The GPU to predict on and how to say it: the one named, else H100 (assumed)."""
    if name:
        return hardware(name), name
    return hardware(DEFAULT_GPU), f"{DEFAULT_GPU} (assumed; --gpu NAME or AREAL_CONF_GPU)"

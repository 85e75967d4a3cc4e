"""What the rollout admits against what a step asks for: AReaL's queue of rollouts and its
staleness cap (``areal/infra/staleness_manager.py``, ``areal/infra/workflow_executor.py``).

Both bite at the first training step, after every engine has started. A step asks the
rollout for the batch: ``train_dataset.batch_size`` rollouts from the single controller
(a scheduler), or its share ``batch_size // d`` from each of the actor's ``d``
data-parallel ranks when AReaL's launcher starts the run (no scheduler), each rank's
executor then dividing ``consumer_batch_size`` by ``d`` as well
(``workflow_executor.py:1068-1083``, ``areal/utils/dataloader.py:51``).
"""

from __future__ import annotations

from dataclasses import dataclass

from areal_conf.config.run_config import EngineSection
from areal_conf.errors import ConfigError
from areal_conf.hints import fix
from areal_conf.rules.context import Context


@dataclass(frozen=True)
class _Asked:
    """A step's batch, and the consumer batch, as one staleness manager sees them."""

    batch: int
    consumer: int
    #: How the batch is counted, for the messages ("" when by the single controller).
    per_rank: str


def _asked(ctx: Context) -> tuple[EngineSection, int, _Asked] | None:
    """The rollout, the batch and what a step asks of the rollout; None when AReaL's
    trainer does not run the config (areal-conf's own) or the batch is not given."""
    run = ctx.run
    if run.own_config:
        return None
    rollout, batch = run.rollout, run.workload.batch_size
    actor = ctx.engines.get("actor")
    if rollout is None or batch is None or actor is None or actor.allocation is None:
        return None
    if run.scheduler_type is not None:  # the single controller: one dataloader of the batch
        return rollout, batch, _Asked(batch, rollout.consumer_batch, "")
    ranks = actor.allocation.parallel.dp_size
    per_rank = f" on each of the actor's {ranks} data-parallel ranks" if ranks > 1 else ""
    return rollout, batch, _Asked(batch // ranks, max(1, rollout.consumer_batch // ranks), per_rank)


def check_rollout_queue(ctx: Context) -> None:
    """The rollout's queue holds a step's batch: AReaL raises ValueError at the first
    step otherwise (``workflow_executor.py:705-708``)."""
    found = _asked(ctx)
    if found is None:
        return
    rollout, batch, asked = found
    queue = rollout.rollout_queue
    if queue >= asked.batch:
        return
    if rollout.queue_size is not None:
        held = "rollout.queue_size"
    elif rollout.max_concurrent_rollouts is not None:
        held = f"by default 16 × rollout.max_concurrent_rollouts {rollout.max_concurrent_rollouts}"
    else:
        held = (
            f"by default 16 × rollout.consumer_batch_size {rollout.consumer_batch}, as "
            "max_concurrent_rollouts is not set"
        )
    raise ConfigError(
        f"rollout.queue_size: the rollout's queue holds {queue} rollouts ({held}), but a "
        f"step asks for {asked.batch}{asked.per_rank} (train_dataset.batch_size {batch}): "
        "AReaL raises \"Inference engine config's queue size is too small: "
        f'{queue} < batch size {asked.batch}" at the first step, after every engine has '
        "started",
        # A consumer batch of the batch also makes the default queue long enough; with
        # one already, the queue itself is short.
        hint=fix(f"rollout.consumer_batch_size={batch}", remark=" (as AReaL's examples set it)")
        if asked.consumer < asked.batch
        else fix(f"rollout.queue_size={asked.batch}"),
    )


def check_consumer_batch(ctx: Context) -> None:
    """``consumer_batch_size`` at least a step's batch: the staleness cap admits
    ``(max_head_offpolicyness + version + 1) × consumer_batch_size`` rollouts in all
    (``staleness_manager.py:102-112``), the version rises once a step
    (``rl_trainer.py:888-895``) and the trainer takes a batch a step, waiting without
    end for what the cap never admits (``workflow_executor.py:460-471``, ``:700-755``)."""
    found = _asked(ctx)
    if found is None:
        return
    rollout, batch, asked = found
    if asked.consumer >= asked.batch:
        return
    ahead = rollout.max_head_offpolicyness
    # Step k (from 0) needs (k + 1) × batch accepted; the cap admits (ahead + k + 1) ×
    # consumer by then: the steps that finish are those k with the first within the second.
    steps = ahead * asked.consumer // (asked.batch - asked.consumer)
    given = f"{rollout.consumer_batch}" + (
        "" if rollout.consumer_batch_size is not None else " (the default)"
    )
    if asked.per_rank:
        now = (
            f"{given}, so {asked.consumer}{asked.per_rank}, fewer than their share of a "
            f"step's batch, {asked.batch} (train_dataset.batch_size {batch})"
        )
    else:
        now = f"{given}, fewer than a step's batch of {batch} (train_dataset.batch_size)"
    after = "at the first step" if steps == 0 else f"after {steps} steps"
    raise ConfigError(
        f"rollout.consumer_batch_size: {now}: AReaL admits (max_head_offpolicyness "
        f"{ahead} + weight version + 1) × consumer_batch_size rollouts in all, so its "
        f"trainer waits without end, {after}, for rollouts the rollout never starts",
        hint=fix(f"rollout.consumer_batch_size={batch}", remark=" (as AReaL's examples set it)"),
    )

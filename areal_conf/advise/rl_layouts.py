"""The layouts of the actor and the rollout that make the shortest RL step on the GPUs
they have together: :func:`fastest_rl_layouts`, which ``suggest`` and ``tune`` rank.

Candidates, on the GPUs the two engines use (:class:`EngineGpus`: their sum when
separated, the GPUs they share when colocated; for a config that does not start as it
is, the GPUs it has):

- every split between them (whole nodes; single GPUs within one node; at most
  :data:`MAX_SPLITS`, evenly spread), with the fastest pairs of layouts there that pass
  the check: each engine's layouts ranked (the rollout's by decode throughput, the
  actor's by training step among those that fit), pairs tried from the top of both
  rankings down until :data:`LAYOUTS_PER_ENGINE` squared pass (at most
  :data:`PAIRS_CHECKED` tried);
- both engines colocated on all of them, as AReaL colocates them: the rollout on the
  actor's GPUs, weights updated through the disk (AReaL refuses NCCL between engines that
  share GPUs) and torch_memory_saver offloading each between its uses
  (``enable_offload``).

Each candidate is the config with its overrides, checked as a whole (so the overrides
pass ``check``), and its step predicted by :func:`areal_conf.perf.rl_step.rl_step`
(with a calibration, when ``tune`` has one).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from areal_conf.config.run_config import RunConfig
from areal_conf.config.run_reading import Reading
from areal_conf.errors import AllocationError
from areal_conf.model.hardware import Hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.decode import RequestLengths
from areal_conf.perf.ranking import as_model_mapping, rank_decode, rank_training
from areal_conf.perf.rl_step import Calibration, RLStep, rl_step
from areal_conf.perf.speed import TrainingStep, training_step
from areal_conf.perf.workload import StepWorkload, concurrent_sequences, step_workload
from areal_conf.rules.fit import engine_knobs
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.validation import Validation, validate_run

#: Fastest layouts of each engine tried on each split (the pairs of the top two of each
#: that pass the check, more when some do not).
LAYOUTS_PER_ENGINE: Final = 2
#: Pairs of layouts checked at most on one split: a config whose fastest layouts fail its
#: own check (a scheduler's or a model's rule the rankings do not know) gets the next ones.
PAIRS_CHECKED: Final = 16
#: Splits tried at most (evenly spread over all of them).
MAX_SPLITS: Final = 32


@dataclass(frozen=True)
class RLLayout:
    """One way to lay out the actor and the rollout, predicted."""

    #: The rollout's and the actor's backend strings (``sglang:d4t2``, ``fsdp:d8``).
    rollout: str
    actor: str
    #: The GPUs each has: the same ones when they are colocated.
    rollout_gpus: int
    actor_gpus: int
    colocated: bool
    #: The RL step predicted for this layout.
    step: RLStep
    #: The overrides that give this layout, as Hydra takes them on the config.
    overrides: tuple[str, ...]

    @property
    def gpus(self) -> int:
        return self.rollout_gpus if self.colocated else self.rollout_gpus + self.actor_gpus

    def to_dict(self) -> dict[str, Any]:
        return {
            "backends": {"rollout": self.rollout, "actor": self.actor},
            "gpus": {"rollout": self.rollout_gpus, "actor": self.actor_gpus},
            "colocated": self.colocated,
            "step_seconds": round(self.step.step_seconds, 3),
            "tokens_per_s": round(self.step.tokens_per_s, 1),
            "mode": self.step.mode,
            "bound": self.step.bound,
            "overrides": list(self.overrides),
        }


@dataclass(frozen=True)
class EngineGpus:
    """The GPUs the actor and the rollout have together, and the actor's layout now (its
    backend, and the knobs of its memory)."""

    actor: ModelAllocation
    gpus: int
    n_gpus_per_node: int
    #: They share their GPUs now (colocated, or v1 AWEX).
    shared: bool

    @staticmethod
    def of(validation: Validation) -> EngineGpus | str:
        """Those of a checked config: the sum of theirs, or the GPUs they share; why not
        when the config builds no actor or no rollout."""
        actor, rollout = validation.engines.get("actor"), validation.engines.get("rollout")
        if not (actor and rollout and actor.allocation and rollout.allocation):
            return "the config builds no actor or no rollout"
        shared = bool(actor.colocated_with or rollout.colocated_with)
        gpus = actor.gpus if shared else actor.gpus + rollout.gpus
        return EngineGpus(actor.allocation, gpus, validation.n_gpus_per_node, shared)

    @staticmethod
    def available(reading: Reading) -> EngineGpus | str:
        """Those a config has, whatever its engines take: the machine's on the local
        scheduler, else ``cluster.n_nodes × n_gpus_per_node``; why not when its actor's
        backend is no training layout."""
        from areal_conf.areal.local_gpus import gpus_per_node
        from areal_conf.spec.parser import parse_backend

        run = reading.run
        if run.actor is None or not run.rl:
            return "the config builds no actor or no rollout"
        local = run.scheduler_type == "local"
        declared, machine = run.cluster.n_gpus_per_node, reading.settings.machine_gpus
        per_node = gpus_per_node(declared, "local" if local else "any", machine).count
        try:
            actor = parse_backend(str(run.actor.backend))
        except AllocationError as err:
            return f"actor.backend: {err.reason}"
        if actor.is_inference:
            return "actor.backend is no training layout"
        shared = run.actor_rollout_colocated or run.v1_awex
        return EngineGpus(actor, per_node * (1 if local else run.cluster.n_nodes), per_node, shared)


def fastest_rl_layouts(
    reading: Reading,
    shape: ModelShape,
    on: EngineGpus,
    *,
    gpu: Hardware,
    gpu_memory_gb: float,
    calibration: Calibration | None = None,
    mean_response_tokens: int | None = None,
    top: int = 3,
) -> tuple[list[RLLayout], list[str]]:
    """The ``top`` candidates (see the module docstring) on the GPUs ``on``, by predicted
    step, and notes on what was not tried."""
    run = reading.run
    total = on.gpus
    work = step_workload(run, mean_response_tokens)
    if not isinstance(work, StepWorkload) or work.trainer != "rl":
        reason = "not an RL config" if isinstance(work, StepWorkload) else work.reason
        return [], [f"no layouts: {reason}"]
    actor_section = run.engines["actor"]
    step = training_step(run, actor_section, mean_response_tokens)
    if isinstance(step, str):
        return [], [f"no layouts: {step}"]
    n = max(1, on.n_gpus_per_node)
    knobs = engine_knobs(run, actor_section, on.actor, gpu_memory_gb)
    knobs.pop("gpu_memory_gb", None)
    knobs.pop("tokens_per_microbatch", None)
    search = _Search(
        reading, shape, gpu, n, step, work, gpu_memory_gb, knobs, calibration, mean_response_tokens
    )
    notes: list[str] = []
    stride = n if total >= 2 * n else 1
    splits = list(range(stride, total, stride))
    if len(splits) > MAX_SPLITS:
        every = len(splits) / MAX_SPLITS
        splits = sorted({splits[int(i * every)] for i in range(MAX_SPLITS)})
        notes.append(f"{MAX_SPLITS} of the {len(range(stride, total, stride))} splits tried")
    separate = _separation_edits(run) if on.shared else ()
    found: dict[tuple[str, str, bool], RLLayout] = {}
    for rollout_gpus in splits:
        for layout in search.layouts(rollout_gpus, total - rollout_gpus, separate, False):
            found.setdefault((layout.rollout, layout.actor, False), layout)
    for layout in search.layouts(total, total, _colocation_edits(run), True):
        found.setdefault((layout.rollout, layout.actor, True), layout)
    ranked = sorted(found.values(), key=lambda r: r.step.step_seconds)
    if not ranked:
        notes.append("no layouts: none of these GPUs' splits has layouts that pass the check")
    return ranked[:top], notes


def _separation_edits(run: RunConfig) -> tuple[str, ...]:
    """Overrides that give the actor and the rollout GPUs of their own."""
    return (
        f"{run.engines['actor'].key('scheduling_strategy.type')}=separation",
        f"{run.engines['rollout'].key('scheduling_strategy.type')}=separation",
    )


def _colocation_edits(run: RunConfig) -> tuple[str, ...]:
    """Overrides that colocate the rollout on the actor's GPUs as AReaL can run it; none
    under v1 AWEX, which shares them as the config is (its weight update kept)."""
    if run.v1_awex:
        return ()
    actor, rollout = run.engines["actor"], run.engines["rollout"]
    return (
        f"{actor.key('scheduling_strategy.type')}=separation",
        f"{rollout.key('scheduling_strategy.type')}=colocation",
        f"{rollout.key('scheduling_strategy.target')}=actor",
        f"{actor.key('weight_update_mode')}=disk",
        "enable_offload=true",
    )


@dataclass(frozen=True)
class _Search:
    reading: Reading
    shape: ModelShape
    gpu: Hardware
    n: int
    step: TrainingStep
    work: StepWorkload
    gpu_memory_gb: float
    memory_knobs: dict[str, Any]
    calibration: Calibration | None
    mean_response_tokens: int | None

    def layouts(
        self, rollout_gpus: int, actor_gpus: int, extra: tuple[str, ...], colocated: bool
    ) -> list[RLLayout]:
        """The fastest layouts of both engines on these GPUs, each checked and predicted."""
        run = self.reading.run
        actor_section, rollout_section = run.engines["actor"], run.engines["rollout"]
        rollout_backend = str(rollout_section.backend).split(":", 1)[0]
        actor_backend = str(actor_section.backend).split(":", 1)[0]
        try:
            decoders = rank_decode(
                rollout_backend,
                rollout_gpus,
                self.shape,
                gpu=self.gpu,
                concurrent=concurrent_sequences(rollout_section, run.workload),
                context_tokens=self.work.decode_context,
                n_gpus_per_node=self.n,
                requests=RequestLengths(
                    self.work.prompt_tokens, max(1, self.work.mean_response_tokens)
                ),
            )
            trainers = rank_training(
                self.step,
                actor_backend,
                actor_gpus,
                as_model_mapping(self.shape),
                gpu=self.gpu,
                n_gpus_per_node=self.n,
                gpu_memory_gb=self.gpu_memory_gb,
                memory_knobs=self.memory_knobs,
                fits_only=True,
            )
        except AllocationError:
            return []
        found: list[RLLayout] = []
        for i, j in itertools.islice(_by_rank(len(decoders), len(trainers)), PAIRS_CHECKED):
            if len(found) == LAYOUTS_PER_ENGINE**2:
                break
            r_spec, trained = decoders[i][0], trainers[j]
            edits = (
                f"{rollout_section.backend_key}={r_spec}",
                f"{actor_section.backend_key}={trained.spec}",
                *extra,
            )
            try:
                checked = validate_run(self.reading, edits, check_fixes=False)
                predicted = rl_step(
                    checked.run or run,
                    checked.rl_engines(),
                    self.shape,
                    gpu=self.gpu,
                    n_gpus_per_node=self.n,
                    mean_response_tokens=self.mean_response_tokens,
                    calibration=self.calibration,
                )
            except AllocationError:
                continue
            overrides = tuple(_as_override(run.present_keys, e) for e in edits)
            found.append(
                RLLayout(
                    r_spec,
                    trained.spec,
                    rollout_gpus,
                    actor_gpus,
                    colocated,
                    predicted,
                    overrides,
                )
            )
        return found


def _by_rank(rows: int, columns: int) -> Iterator[tuple[int, int]]:
    """The pairs ``(i, j)`` of two rankings' places, the best first: those of the top
    two of each before any with a third, and so on ((0, 0); (0, 1), (1, 0), (1, 1);
    (0, 2), ...)."""
    for k in range(max(rows, columns)):
        if k < columns:
            yield from ((i, k) for i in range(min(k, rows)))
        if k < rows:
            yield from ((k, j) for j in range(min(k + 1, columns)))


def _as_override(present: frozenset[str], edit: str) -> str:
    """``edit`` as Hydra takes it on the config: ``++key=value`` where the config lacks
    the key."""
    key = edit.split("=", 1)[0]
    return edit if key in present else f"++{edit}"

"""``python -m areal_conf suggest``: the predicted-fastest layouts of a config's engines,
and the rollout/actor split at which generation keeps up with training.

Pure: it takes the config as read (:class:`areal_conf.config.run_config.RunConfig`), its plan and
the model's shape; the command line composes the YAML and prints :func:`suggestion_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from areal_conf.advise.rl_layouts import EngineGpus, RLLayout, fastest_rl_layouts
from areal_conf.config.run_config import RunConfig
from areal_conf.config.run_reading import Reading
from areal_conf.errors import AllocationError
from areal_conf.model.hardware import Hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.decode import DecodeThroughput, RequestLengths
from areal_conf.perf.ranking import (
    Critic,
    RankedLayout,
    RLSplit,
    as_model_mapping,
    rank_decode,
    rank_training,
    rl_split,
)
from areal_conf.perf.rl_step import TRAINING_SIDE, RLStep
from areal_conf.perf.speed import TrainingStep, training_step
from areal_conf.perf.workload import (
    NoWorkload,
    StepWorkload,
    concurrent_sequences,
    decode_context,
    step_workload,
)
from areal_conf.plan.plan import Plan
from areal_conf.plan.report import columns, decode_rows, ranked_layout_rows, seconds_text
from areal_conf.rules.fit import engine_knobs
from areal_conf.validation import Validation


@dataclass(frozen=True)
class TrainingSuggestion:
    engine: str
    current: str
    gpus: int
    step: TrainingStep
    ranked: tuple[RankedLayout, ...]
    current_seconds: float | None


@dataclass(frozen=True)
class RolloutSuggestion:
    engine: str
    current: str
    gpus: int
    ranked: tuple[tuple[str, DecodeThroughput], ...]
    concurrent: int
    context_tokens: int
    #: What each request prefills and generates, when the prefill is counted.
    requests: RequestLengths | None = None


@dataclass(frozen=True)
class Suggestion:
    gpu: str
    training: tuple[TrainingSuggestion, ...]
    rollout: RolloutSuggestion | None
    split: RLSplit | None
    notes: tuple[str, ...]
    #: The config's predicted RL step, and the layouts of the actor and the rollout with
    #: the shortest one (:mod:`areal_conf.advise.rl_layouts`), colocated ones included.
    rl_step: RLStep | None = None
    rl_layouts: tuple[RLLayout, ...] = ()
    #: Why the config as it is does not start, when it does not: the layouts offered are
    #: then those that pass on the ``gpus`` GPUs it has.
    refused: AllocationError | None = None
    gpus: int = 0

    def to_dict(self) -> dict[str, Any]:
        """What ``suggest --json`` prints."""
        return {
            "gpu": self.gpu,
            "training": {
                t.engine: {
                    "current": t.current,
                    "gpus": t.gpus,
                    "current_step_seconds": t.current_seconds,
                    "fastest": [
                        {"backend": r.spec, "step_seconds": round(r.seconds, 3), "fits": r.fits}
                        for r in t.ranked
                    ],
                }
                for t in self.training
            },
            "rollout": None
            if self.rollout is None
            else {
                "current": self.rollout.current,
                "gpus": self.rollout.gpus,
                "fastest": [
                    {"backend": spec, "tokens_per_s": round(d.tokens_per_s, 1)}
                    for spec, d in self.rollout.ranked
                ],
            },
            "rl_step": None if self.rl_step is None else self.rl_step.to_dict(),
            "rl_layouts": [layout.to_dict() for layout in self.rl_layouts],
            "refused": None
            if self.refused is None
            else {"reason": self.refused.reason, "rule": self.refused.rule, "gpus": self.gpus},
            "notes": list(self.notes),
        }


def suggest(
    reading: Reading,
    plan: Validation | AllocationError,
    shape: ModelShape,
    *,
    gpu: Hardware,
    gpu_said: str,
    gpu_memory_gb: float,
    mean_response_tokens: int | None = None,
    top: int = 3,
) -> Suggestion:
    """The ``top`` predicted-fastest layouts of each engine on the GPUs it has, the
    rollout/actor split (when both are built and run on GPUs of their own), and the
    layouts of both with the shortest whole RL step. For a config that does not start
    (``plan`` is its error, of a rule of :data:`LAYOUT_RULES`): the layouts of the actor
    and the rollout with the shortest step that pass on the GPUs it has (the machine's on
    the local scheduler, else ``cluster.n_nodes × n_gpus_per_node``); the error itself
    when that cannot be said (another rule, no actor or rollout, a backend that does not
    parse)."""

    def whole_step(on: EngineGpus) -> tuple[list[RLLayout], list[str]]:
        found, notes = fastest_rl_layouts(
            reading,
            shape,
            on,
            gpu=gpu,
            gpu_memory_gb=gpu_memory_gb,
            mean_response_tokens=mean_response_tokens,
            top=top,
        )
        return found, [f"whole step: {note}" for note in notes]

    if isinstance(plan, AllocationError):
        has = EngineGpus.available(reading) if plan.rule in LAYOUT_RULES else None
        if has is None or isinstance(has, str) or has.gpus < 2:
            raise plan
        passing, said = whole_step(has)
        return Suggestion(
            gpu_said, (), None, None, tuple(said), None, tuple(passing), refused=plan, gpus=has.gpus
        )
    run = reading.run
    n = max(1, plan.n_gpus_per_node)
    mapping = as_model_mapping(shape)
    notes: list[str] = []
    training: list[TrainingSuggestion] = []
    for name, e in plan.engines.items():
        section = run.engines.get(name)
        if e.allocation is None or e.allocation.is_inference or section is None:
            continue
        step = training_step(run, section, mean_response_tokens)
        if isinstance(step, str):
            notes.append(f"{name}: no prediction ({step})")
            continue
        knobs = engine_knobs(run, section, e.allocation, gpu_memory_gb)
        knobs.pop("gpu_memory_gb", None)
        knobs.pop("tokens_per_microbatch", None)
        ranked = rank_training(
            step,
            e.allocation.backend,
            e.gpus,
            mapping,
            gpu=gpu,
            n_gpus_per_node=n,
            gpu_memory_gb=gpu_memory_gb,
            memory_knobs=knobs,
            top=top,
        )
        training.append(
            TrainingSuggestion(name, str(e.allocation), e.gpus, step, tuple(ranked), e.step_seconds)
        )
    rollout_engine = plan.engines.get("rollout")
    rollout: RolloutSuggestion | None = None
    found = step_workload(run, mean_response_tokens)
    work = found if isinstance(found, StepWorkload) and found.trainer == "rl" else None
    rollout_section = run.rollout
    concurrent = None
    if rollout_section is not None:
        concurrent = concurrent_sequences(rollout_section, run.workload)
    if rollout_engine is not None and rollout_engine.allocation is not None and concurrent:
        alloc = rollout_engine.allocation
        context = decode_context(run, mean_response_tokens)
        requests = (
            RequestLengths(work.prompt_tokens, max(1, work.mean_response_tokens))
            if work is not None
            else None
        )
        rollout = RolloutSuggestion(
            "rollout",
            str(alloc),
            rollout_engine.gpus,
            tuple(
                rank_decode(
                    alloc.backend,
                    rollout_engine.gpus,
                    shape,
                    gpu=gpu,
                    concurrent=concurrent,
                    context_tokens=context,
                    n_gpus_per_node=n,
                    mem_fraction=run.workload.mem_fraction.get(alloc.backend),
                    requests=requests,
                    top=top,
                )
            ),
            concurrent,
            context,
            requests,
        )
    split = _split(run, plan, shape, gpu, mean_response_tokens, notes)
    layouts: list[RLLayout] = []
    on = EngineGpus.of(plan)
    if plan.rl_step is not None and not isinstance(on, str):
        layouts, more = whole_step(on)
        notes += more
    return Suggestion(
        gpu_said, tuple(training), rollout, split, tuple(notes), plan.rl_step, tuple(layouts)
    )


#: The rules whose errors a change of the actor's and the rollout's layouts can answer:
#: ``suggest`` offers layouts that pass on the config's GPUs instead of its error.
LAYOUT_RULES: Final = frozenset(
    {"capacity", "placement", "scheduler-gpus", "memory", "model", "colocation", "workers"}
)


def _split(
    run: RunConfig,
    plan: Plan,
    shape: ModelShape,
    gpu: Hardware,
    mean_response_tokens: int | None,
    notes: list[str],
) -> RLSplit | None:
    actor, rollout = plan.engines.get("actor"), plan.engines.get("rollout")
    if actor is None or rollout is None or actor.allocation is None or rollout.allocation is None:
        return None
    if actor.colocated_with or rollout.colocated_with:
        notes.append("split: the rollout and the actor share GPUs, so there is no split to choose")
        return None
    section = run.actor
    work = step_workload(run, mean_response_tokens)
    if section is None or not isinstance(work, StepWorkload):
        notes.append(f"split: {work.reason if isinstance(work, NoWorkload) else 'no actor'}")
        return None
    rollout_section = run.rollout
    try:
        return rl_split(
            shape,
            gpu=gpu,
            total_gpus=actor.gpus + rollout.gpus,
            batch_size=work.batch_size,
            n_samples=work.n_samples,
            max_new_tokens=work.max_new_tokens,
            prompt_tokens=work.prompt_tokens,
            mean_response_tokens=mean_response_tokens,
            n_gpus_per_node=max(1, plan.n_gpus_per_node),
            rollout_backend=rollout.allocation.backend,
            actor_backend=actor.allocation.backend,
            tokens_per_microbatch=section.tokens_per_mb,
            recompute="full" if section.gradient_checkpointing else "none",
            ppo_n_minibatches=max(1, section.ppo_n_minibatches),
            asynchronous=(rollout_section.max_head_offpolicyness if rollout_section else 0) > 0,
            max_concurrent_rollouts=rollout_section.max_concurrent_rollouts
            if rollout_section
            else None,
            critic=_critic(run, plan, notes),
        )
    except AllocationError as err:
        notes.append(f"split: {err.reason}")
        return None


def _critic(run: RunConfig, plan: Plan, notes: list[str]) -> Critic | None:
    """The critic the split counts: on the actor's GPUs (colocated) or on its own; None
    when there is no critic that trains (or it shares the rollout's GPUs, which the split
    moves: not counted, and said)."""
    critic, section = plan.engines.get("critic"), run.engines.get("critic")
    if critic is None or critic.allocation is None or section is None or not section.trainable:
        return None
    if critic.owner not in ("actor", critic.name):
        notes.append(f"split: the critic runs on the {critic.owner}'s GPUs; not counted")
        return None
    return Critic(
        backend=critic.allocation.backend,
        ppo_n_minibatches=section.ppo_n_minibatches,
        tokens_per_microbatch=section.tokens_per_mb,
        recompute="full" if section.gradient_checkpointing else "none",
        layout=None if critic.owner == "actor" else str(critic.allocation),
    )


def suggestion_text(s: Suggestion) -> str:
    """What ``suggest`` prints."""
    lines = [f"predicted on {s.gpu}"]
    for t in s.training:
        now = "" if t.current_seconds is None else f", {seconds_text(t.current_seconds)} s/step"
        lines += ["", f"{t.engine} ({t.current} on {t.gpus} GPUs{now}): fastest layouts"]
        lines += _indented(ranked_layout_rows(t.ranked, ""))
        lines.append(
            f"  {t.step.batch_text()}, micro-batches of at most "
            f"{t.step.tokens_per_microbatch:,} tokens"
        )
    if s.rollout is not None:
        r = s.rollout
        lines += ["", f"{r.engine} ({r.current} on {r.gpus} GPUs): fastest layouts"]
        lines += _indented(decode_rows(r.ranked, ""))
        prefill = (
            "; prefill not counted"
            if r.requests is None
            else f"; a new request's {r.requests.prompt:,}-token prompt prefilled for each "
            "finished response"
        )
        lines.append(
            f"  decoding {r.concurrent:,} sequences at once, {r.context_tokens:,} tokens of "
            f"context on average{prefill}"
        )
    if s.refused is not None:
        lines += _refused_lines(s)
    elif s.rl_step is not None and s.rl_layouts:
        lines += _rl_step_lines(s.rl_step, s.rl_layouts)
    elif s.split is not None:  # the whole step could not be predicted: the split alone
        lines += _split_lines(s.split)
    lines += [f"note: {n}" for n in s.notes]
    return "\n".join(lines)


def _refused_lines(s: Suggestion) -> list[str]:
    """Why the config does not start as it is, and the layouts that do on its GPUs."""
    assert s.refused is not None
    lines = [
        "",
        f"this config does not start as it is (rule: {s.refused.rule}): "
        f"{s.refused.reason.splitlines()[0]}",
    ]
    if not s.rl_layouts:
        return [*lines, f"no layout of the actor and the rollout passes on its {s.gpus} GPUs"]
    return lines + _table_lines(
        f"whole RL step of the fastest layouts of the actor and the rollout that pass on its "
        f"{s.gpus} GPUs:",
        s.rl_layouts,
        None,
    )


def _rl_step_lines(step: RLStep, found: Sequence[RLLayout]) -> list[str]:
    """The whole-step table beside the config's own step."""
    return [
        "",
        *_table_lines(
            f"whole RL step ({step.mode}, as AReaL runs this config): "
            f"{seconds_text(step.step_seconds)} s now, {step.bound}-bound; fastest layouts of "
            "the actor and the rollout on their GPUs:",
            found,
            step,
        ),
    ]


def _table_lines(title: str, found: Sequence[RLLayout], step: RLStep | None) -> list[str]:
    """Each layout's generation and training side, its step, and what its step leaves
    out (marked, then listed)."""
    lines = [title]
    rows = [
        (
            "rollout",
            "actor",
            "GPUs (rollout+actor)",
            "generate s",
            "training s",
            "step s",
            "bound",
            "overrides",
        )
    ]
    left_out: list[tuple[str, ...]] = []
    for layout in found:
        phases = layout.step.phases
        missing = layout.step.not_counted
        if missing and missing not in left_out:
            left_out.append(missing)
        mark = "*" * (left_out.index(missing) + 1) if missing else ""
        rows.append(
            (
                layout.rollout,
                layout.actor,
                f"{layout.gpus}, colocated"
                if layout.colocated
                else f"{layout.rollout_gpus}+{layout.actor_gpus}",
                seconds_text(phases.get("generate", 0.0)),
                seconds_text(sum(phases.get(p, 0.0) for p in TRAINING_SIDE)),
                seconds_text(layout.step.step_seconds) + mark,
                layout.step.bound,
                " ".join(layout.overrides),
            )
        )
    lines += _indented(rows)
    a = found[0].step.assumptions
    lines.append(
        f"  assumed: mean response {a['mean_response_tokens']:,} tokens "
        f"(--mean-response-tokens), prompts of {a['prompt_tokens']:,} tokens; training s: "
        "the phases that run while the rollout generates (values, log-probabilities, "
        "training)"
    )
    for n, missing in enumerate(left_out, start=1):
        lines.append(f"  {'*' * n} not counted: {'; '.join(missing)}")
    if step is not None and step.not_counted and step.not_counted not in left_out:
        lines.append(f"  the config's own step does not count: {'; '.join(step.not_counted)}")
    return lines


def _split_lines(sp: RLSplit) -> list[str]:
    """The rollout/actor split table: generation against the actor's training alone."""
    how = "longer of" if sp.assumptions["asynchronous"] else "sum of"
    lines = [
        "",
        f"rollout/actor split of {sp.best.rollout_gpus + sp.best.actor_gpus} GPUs (a step "
        f"takes the {how} generating and training):",
    ]
    critic = sp.best.critic is not None
    rows = [
        (
            "rollout",
            "actor",
            "rollout layout",
            "actor layout",
            *(("critic layout",) if critic else ()),
            "generate s",
            "train s",
            "step s",
        )
    ]
    for o in sp.options:
        mark = " <- best" if o == sp.best else ""
        rows.append(
            (
                str(o.rollout_gpus),
                str(o.actor_gpus),
                o.rollout,
                o.actor,
                *((o.critic or "",) if critic else ()),
                seconds_text(o.generate_s),
                seconds_text(o.train_s),
                seconds_text(o.step_s) + mark,
            )
        )
    lines += _indented(rows)
    a = sp.assumptions
    lines.append(
        f"  assumed: mean response {a['mean_response_tokens']:,} tokens "
        "(--mean-response-tokens), prompts of "
        f"{a['prompt_tokens']:,} tokens, {a['concurrent_sequences']:,} sequences decoded "
        f"at once; counted: {a['counted']}"
    )
    return lines


def _indented(rows: Sequence[tuple[str, ...]]) -> list[str]:
    return ["  " + line for line in columns(rows)]

"""``python -m areal_conf tune RUN``: a real run's steps against the prediction, the
model calibrated to the cluster, and the layouts and split it then predicts fastest.

Pure: it takes the run's log as read (:mod:`areal_conf.advise.run_logs`), the config the
run used as checked (:class:`areal_conf.validation.Validation` and its
:class:`areal_conf.config.run_reading.Reading`); the command line composes the YAML and
prints :func:`tune_text` or :meth:`Tuning.to_dict`.

- **Warm-up.** The first steps of a run compile kernels, fill caches and, when
  asynchronous, start with an empty rollout queue: :func:`warmup_steps` of them are left
  out.
- **Measured.** Each phase is the median over the steps kept of AReaL's
  ``timeperf/<key>`` (:data:`areal_conf.perf.rl_step.TIMEPERF_KEYS`); medians, so that a
  step that saves a checkpoint or evaluates does not count. A step's time is the median
  gap between consecutive ``done.`` lines. Generation is measured by the trainer's wait
  for a batch (``timeperf/rollout``): all of it when generation and training do not
  overlap; when they do, the wait plus the training phases, and only when there was a
  wait (else generation kept up and its speed is not seen). The mean response length is
  ``ppo_actor/n_valid_tokens`` (response tokens; ``ppo_actor/n_tokens`` counts padding)
  over the batch's sequences; the prediction is made for it.
- **Calibration.** Each kind of phase (:class:`areal_conf.perf.rl_step.Calibration`) gets
  the ratio of measured to predicted seconds, within :data:`FACTOR_BOUNDS`: a ratio beyond
  them says the model does not describe this run (another GPU, another model), not that
  the cluster is that much slower.
- **Recommendations.** :func:`areal_conf.advise.rl_layouts.fastest_rl_layouts` with the
  calibrated model.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from areal_conf.advise.rl_layouts import EngineGpus, RLLayout, fastest_rl_layouts
from areal_conf.advise.run_logs import RunLog
from areal_conf.config.run_reading import Reading
from areal_conf.errors import ConfigError
from areal_conf.model.hardware import Hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.rl_step import (
    TIMEPERF_KEYS,
    TRAINING_SIDE,
    Calibration,
    Mode,
    RLStep,
    compose,
    mode_of,
    rl_step,
)
from areal_conf.perf.workload import StepWorkload, step_workload
from areal_conf.plan.report import columns, seconds_text
from areal_conf.validation import Validation

#: The least and most each calibration factor may be (see the module docstring). The
#: weight update and offloads are priced by their bytes alone, a floor that fixed costs
#: a call (serialising buckets, a request to each server) can exceed many times over.
FACTOR_BOUNDS: Final[Mapping[str, tuple[float, float]]] = {
    "generate": (0.2, 5.0),
    "train": (0.2, 5.0),
    "update_weights": (0.2, 100.0),
    "transfer": (0.2, 100.0),
}
#: A wait for the rollout shorter than this share of the step means generation kept up.
KEPT_UP: Final = 0.05


@dataclass(frozen=True)
class Measured:
    """What the run's log says of a step, over the steps kept."""

    #: The first and the last step kept, and the warm-up steps left out before them.
    first_step: int
    last_step: int
    warmup: int
    #: The median seconds of a step (the gap between two steps' logs).
    step_seconds: float
    #: Half the spread of the middle half of the step times, as a share of their median.
    spread: float
    #: The median seconds of each phase the log times (``timeperf/*``), by phase.
    phases: Mapping[str, float]
    #: The median seconds the trainer waited for the rollout's batch.
    rollout_wait: float
    #: Seconds to generate a batch, when the log shows it (see the module docstring).
    generate: float | None
    #: The median response's tokens and the tokens a step trained on, when logged.
    mean_response_tokens: int | None
    tokens_per_step: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [self.first_step, self.last_step],
            "warmup_steps_left_out": self.warmup,
            "step_seconds": round(self.step_seconds, 3),
            "spread": round(self.spread, 4),
            "rollout_wait": round(self.rollout_wait, 3),
            "phases": {
                **({"generate": round(self.generate, 3)} if self.generate is not None else {}),
                **{k: round(v, 3) for k, v in self.phases.items()},
            },
            "mean_response_tokens": self.mean_response_tokens,
            "tokens_per_step": self.tokens_per_step,
        }


@dataclass(frozen=True)
class Tuning:
    log: str
    gpu: str
    measured: Measured
    predicted: RLStep
    calibrated: RLStep
    calibration: Calibration
    #: Why each factor is what it is, by factor.
    reasons: Mapping[str, str]
    recommendations: tuple[RLLayout, ...]
    current: Mapping[str, str]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "log": self.log,
            "gpu": self.gpu,
            "layout": dict(self.current),
            "measured": self.measured.to_dict(),
            "predicted": self.predicted.to_dict(),
            "calibration": {
                "factors": self.calibration.to_dict(),
                "reasons": dict(self.reasons),
                "calibrated": self.calibrated.to_dict(),
            },
            "recommendations": [r.to_dict() for r in self.recommendations],
            "notes": list(self.notes),
        }


def warmup_steps(count: int) -> int:
    """Steps left out at the start of a run of ``count`` logged steps: two when at least
    five remain, one when at least two remain, else none."""
    if count >= 7:
        return 2
    return 1 if count >= 3 else 0


def measure(log: RunLog, mode: Mode, sequences: int) -> Measured:
    """The run's step (see the module docstring) for a run in ``mode`` whose batch has
    ``sequences`` sequences."""
    steps = log.steps
    skip = warmup_steps(len(steps))
    kept = steps[skip:]
    gaps = [steps[i].done_at - steps[i - 1].done_at for i in range(max(1, skip), len(steps))]
    if not gaps:
        raise ConfigError(
            f"{log.path} has {len(steps)} step{'s' if len(steps) != 1 else ''}: a step's time "
            "is the gap between two",
            hint="let the run log at least three steps (the first is left out as warm-up); "
            "20 give a steady measure",
        )
    phases: dict[str, float] = {}
    for phase, keys in TIMEPERF_KEYS.items():
        values = [sum(s.stats.get(f"timeperf/{k}", 0.0) for k in keys) for s in kept]
        if any(f"timeperf/{k}" in s.stats for s in kept for k in keys):
            phases[phase] = statistics.median(values)
    wait = statistics.median([s.stats.get("timeperf/rollout", 0.0) for s in kept])
    step_seconds = statistics.median(gaps)
    generate: float | None = wait
    if mode == "asynchronous":
        training = sum(phases.get(p, 0.0) for p in TRAINING_SIDE)
        generate = wait + training if wait > KEPT_UP * step_seconds else None
    valid = _median_of(kept, "ppo_actor/n_valid_tokens")
    seqs = _median_of(kept, "ppo_actor/n_seqs") or sequences
    q1, _, q3 = statistics.quantiles(gaps, n=4) if len(gaps) >= 2 else (gaps[0],) * 3
    return Measured(
        first_step=kept[0].global_step,
        last_step=kept[-1].global_step,
        warmup=skip,
        step_seconds=step_seconds,
        spread=(q3 - q1) / 2 / step_seconds if step_seconds > 0 else 0.0,
        phases=phases,
        rollout_wait=wait,
        generate=generate,
        mean_response_tokens=None if valid is None else max(1, round(valid / seqs)),
        tokens_per_step=_median_of(kept, "ppo_actor/update/n_tokens"),
    )


def _median_of(steps: Sequence[Any], key: str) -> float | None:
    values = [s.stats[key] for s in steps if key in s.stats]
    return statistics.median(values) if values else None


def calibrate(measured: Measured, predicted: RLStep) -> tuple[Calibration, dict[str, str]]:
    """The factors that turn ``predicted`` into ``measured``, each with why it is what it
    is (see the module docstring)."""
    factors: dict[str, float] = {}
    reasons: dict[str, str] = {}
    groups = {
        "generate": ("generate",),
        "train": TRAINING_SIDE,
        "update_weights": ("update_weights",),
        "transfer": ("offload", "onload"),
    }
    seen = dict(measured.phases)
    if measured.generate is not None:
        seen["generate"] = measured.generate
    for factor, phases in groups.items():
        both = [p for p in phases if p in seen and predicted.phases.get(p)]
        if not both:
            reasons[factor] = _unseen(factor, measured)
            continue
        got = sum(seen[p] for p in both)
        want = sum(predicted.phases[p] for p in both)
        ratio = got / want
        low, high = FACTOR_BOUNDS[factor]
        kept = min(high, max(low, ratio))
        said = "" if both == [factor] else f" ({', '.join(both)})"
        reasons[factor] = (
            f"measured {seconds_text(got)} s against {seconds_text(want)} s predicted{said}"
        )
        if kept != ratio:
            reasons[factor] += (
                f"; the ratio {ratio:.3g} is kept at {kept:g}: beyond that the model does not "
                "describe this run (check --gpu and the model's shape)"
            )
        factors[factor] = kept
    if measured.generate is None:
        seen["generate"] = 0.0  # it kept up: the step is the training side's
    # What the prediction prices, as measured; the rest of the step is a fixed cost
    priced = {p: s for p, s in seen.items() if p in predicted.phases}
    timed, _, _ = compose(predicted.mode, priced)
    other = max(0.0, measured.step_seconds - timed)
    factors["other_seconds"] = other
    unpriced = sorted(set(seen) - set(priced) - {"generate"})
    reasons["other_seconds"] = (
        f"the step's {seconds_text(measured.step_seconds)} s less the phases predicted, as "
        f"measured and as they overlap ({seconds_text(timed)} s): advantages, clearing "
        "batches, logging" + (f", and {', '.join(unpriced)}" if unpriced else "")
    )
    return Calibration(**factors), reasons


def _unseen(factor: str, measured: Measured) -> str:
    if factor == "generate":
        return (
            "not measured: generation kept up with training (the trainer waited "
            f"{seconds_text(measured.rollout_wait)} s a step for a batch)"
        )
    return "not measured: the run has no such phase, or it is not predicted"


def tuning(
    log: RunLog,
    reading: Reading,
    validation: Validation,
    shape: ModelShape,
    *,
    gpu: Hardware,
    gpu_said: str,
    gpu_memory_gb: float,
    mean_response_tokens: int | None,
    top: int = 3,
) -> Tuning:
    """Everything ``tune`` reports for the run whose log is ``log`` and whose config,
    as checked, is ``validation``."""
    run = reading.run
    engines = validation.rl_engines()
    if "actor" not in engines or "rollout" not in engines or run.trainer != "rl":
        raise ConfigError(
            "tune reads RL runs: the config builds no actor and rollout",
            hint="give the PPO/GRPO config the run used with --config",
        )
    work = step_workload(run, mean_response_tokens)
    sequences = work.sequences if isinstance(work, StepWorkload) else 1
    mode = mode_of(run, engines)
    measured = measure(log, mode, sequences)
    response = mean_response_tokens or measured.mean_response_tokens
    n = max(1, validation.n_gpus_per_node)

    def predict(calibration: Calibration | None = None) -> RLStep:
        return rl_step(
            run,
            engines,
            shape,
            gpu=gpu,
            n_gpus_per_node=n,
            mean_response_tokens=response,
            calibration=calibration,
        )

    predicted = predict()
    calibration, reasons = calibrate(measured, predicted)
    calibrated = predict(calibration)
    on = EngineGpus.of(validation)
    assert not isinstance(on, str), on  # the actor and the rollout are built (above)
    recommendations, notes = fastest_rl_layouts(
        reading,
        shape,
        on,
        gpu=gpu,
        gpu_memory_gb=gpu_memory_gb,
        calibration=calibration,
        mean_response_tokens=response,
        top=top,
    )
    if log.earlier:
        notes.insert(0, f"{log.earlier} steps of an earlier start of this trial left out")
    if log.cut_at is not None:
        notes.insert(
            0, f"the log ends inside step {log.cut_at}'s stats: read up to the step before"
        )
    current: dict[str, str] = {
        name: str(engines[name].allocation) for name in ("rollout", "actor") if name in engines
    }
    return Tuning(
        str(log.path),
        gpu_said,
        measured,
        predicted,
        calibrated,
        calibration,
        reasons,
        tuple(recommendations),
        current,
        tuple(notes),
    )


def tune_text(t: Tuning) -> str:
    """What ``tune`` prints."""
    m, p, c = t.measured, t.predicted, t.calibrated
    lines = [
        f"run: {t.log}: steps {m.first_step}-{m.last_step} ({m.warmup} warm-up step"
        f"{'s' if m.warmup != 1 else ''} left out)",
        f"layout: rollout {t.current.get('rollout')}, actor {t.current.get('actor')}; "
        f"{p.mode}; predicted on {t.gpu}",
        "",
    ]
    rows = [("phase", "measured s", "predicted s", "calibrated s")]
    seen = dict(m.phases)
    if m.generate is not None:
        seen["generate"] = m.generate
    for phase in p.phases:
        got = seen.get(phase)
        rows.append(
            (
                phase,
                "-" if got is None else seconds_text(got),
                seconds_text(p.phases[phase]),
                seconds_text(c.phases.get(phase, 0.0)),
            )
        )
    rows.append(
        (
            "wait for rollout",
            seconds_text(m.rollout_wait),
            seconds_text(p.rollout_wait),
            seconds_text(c.rollout_wait),
        )
    )
    rows.append(
        (
            "step",
            seconds_text(m.step_seconds),
            seconds_text(p.step_seconds),
            seconds_text(c.step_seconds),
        )
    )
    lines += ["  " + line for line in columns(rows)]
    lines.append("")
    lines.append("calibration (measured / predicted):")
    for name, factor in t.calibration.to_dict().items():
        amount = f"+{seconds_text(factor)} s" if name == "other_seconds" else f"×{factor:.3g}"
        lines.append(f"  {name} {amount}: {t.reasons.get(name, '')}")
    lines.append("")
    now = f"now {seconds_text(m.step_seconds)} s a step, {c.bound}-bound"
    if t.recommendations:
        best = t.recommendations[0]
        gpus = best.gpus
        plus = f"{best.step.step_seconds * m.spread:.2g}"
        how = "colocated" if best.colocated else "split anew"
        lines.append(
            f"{now}; with rollout {best.rollout} and actor {best.actor} on the same {gpus} "
            f"GPUs ({how}): {seconds_text(best.step.step_seconds)} s (±{plus})"
        )
        lines.append("")
        table = [("rollout", "actor", "GPUs (rollout+actor)", "step s", "bound", "overrides")]
        current = (t.current.get("rollout"), t.current.get("actor"))
        for r in t.recommendations:
            now_mark = " (now)" if (r.rollout, r.actor) == current and not r.colocated else ""
            table.append(
                (
                    r.rollout,
                    r.actor + now_mark,
                    f"{r.gpus}, colocated" if r.colocated else f"{r.rollout_gpus}+{r.actor_gpus}",
                    seconds_text(r.step.step_seconds),
                    r.step.bound,
                    " ".join(r.overrides),
                )
            )
        lines += ["  " + line for line in columns(table)]
    else:
        lines.append(now)
    lines += [f"note: {n}" for n in t.notes]
    if c.not_counted:
        lines.append(f"note: not counted: {', '.join(c.not_counted)}")
    return "\n".join(lines)

"""``tune``: a run's log read back, its phases against the prediction, the calibration
and the recommendations. The logs under tests/fixtures/areal_runs/ were written by
AReaL's own logging code (``make_runs.py`` there) on phases whose true seconds each
run's ``truth.json`` holds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _helpers import FIXTURES
from conftest import Cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from areal_conf import AllocationError, Settings
from areal_conf.advise.run_logs import read_log
from areal_conf.advise.tune import FACTOR_BOUNDS, measure, tuning
from areal_conf.command.argv import parse_config_command
from areal_conf.command.check import check_command, compose_as_areal
from areal_conf.perf.speed import gpu_for_speed
from areal_conf.validation import read_run, validate_run

RUNS = FIXTURES / "areal_runs"
GRPO = RUNS / "sc_grpo_25"
CONFIG = RUNS / "configs" / "sc_grpo_25.yaml"
TRUTH = json.loads((GRPO / "truth.json").read_text())
SETTINGS = Settings(areal_version="2.0", gpu="h100")


def truth_of(run: str) -> dict[str, Any]:
    return json.loads((RUNS / run / "truth.json").read_text())  # type: ignore[no-any-return]


def test_the_log_gives_back_every_step_and_its_time() -> None:
    log = read_log(GRPO)
    assert log.path.name == "main.log"
    assert [s.global_step for s in log.steps] == list(range(1, 26))
    for step, true in zip(log.steps, TRUTH["steps"], strict=True):
        assert step.done_at == pytest.approx(true["t_done_unix"], abs=1e-3)  # ms in the log
        for key, value in true["committed"].items():
            assert step.stats[key] == pytest.approx(value, rel=1e-4)  # %.4e in the table


def test_a_trainer_log_of_the_launcher_reads_the_same() -> None:
    log = read_log(RUNS / "spmd_ppo_8")
    truth = truth_of("spmd_ppo_8")
    assert log.path.name == "trainer.log"
    assert len(log.steps) == len(truth["steps"]) == 8
    for step, true in zip(log.steps, truth["steps"], strict=True):
        assert step.done_at == pytest.approx(true["t_done_unix"], abs=1e-3)
        assert step.stats["timeperf/critic_train_step"] == pytest.approx(
            true["committed"]["timeperf/critic_train_step"], rel=1e-4
        )


PPO_DIR = RUNS / "spmd_ppo_8" / "logs" / "areal" / "gsm8k-ppo" / "trial1"


@pytest.mark.parametrize("source", ["tensorboard", "perf_tracer"])
def test_tensorboard_events_and_the_perf_tracer_give_the_same_steps(source: str) -> None:
    """Without a text log (AReaL's Ray launcher writes none), the event file or the
    trace: the same phases, and the same gaps between steps."""
    truth = truth_of("spmd_ppo_8")
    log = read_log(PPO_DIR / source)
    assert log.path.name.startswith("events.out.tfevents" if source == "tensorboard" else "traces")
    assert [s.global_step for s in log.steps] == list(range(1, 9))
    for step, true in zip(log.steps, truth["steps"], strict=True):
        for key, value in true["committed"].items():
            if key.startswith("timeperf/"):
                assert step.stats[key] == pytest.approx(value, rel=1e-4, abs=2e-6), key
    gaps = [b.done_at - a.done_at for a, b in zip(log.steps, log.steps[1:], strict=False)]
    true_gaps = [
        b["t_done_unix"] - a["t_done_unix"]
        for a, b in zip(truth["steps"], truth["steps"][1:], strict=False)
    ]
    assert gaps == pytest.approx(true_gaps, abs=0.2)  # the trace ends a step at its last span


def test_a_directory_without_a_text_log_is_read_from_its_event_file(tmp_path: Path) -> None:
    shutil.copytree(PPO_DIR / "tensorboard", tmp_path / "tb")
    assert read_log(tmp_path).path.name.startswith("events.out.tfevents")


def test_a_log_cut_inside_a_table_reads_the_steps_before() -> None:
    log = read_log(RUNS / "sc_grpo_truncated")
    truth = truth_of("sc_grpo_truncated")
    assert len(log.steps) == truth["complete_steps"]
    assert log.cut_at == truth["partial_step"]


def test_a_trial_started_again_is_read_from_its_last_start(tmp_path: Path) -> None:
    text = (GRPO / TRUTH["log_file"]).read_text()
    (tmp_path / "main.log").write_text(text + text)
    log = read_log(tmp_path)
    assert len(log.steps) == 25 and log.earlier == 25


@pytest.fixture(scope="module")
def tuned() -> Any:
    command = parse_config_command(["--config", str(CONFIG)])
    cfg = compose_as_areal(command, areal_version="2.0")
    reading = read_run(cfg, settings=SETTINGS)
    checked = validate_run(reading)
    assert not isinstance(checked.shape, str) and checked.shape is not None
    gpu, said = gpu_for_speed("h100")
    return tuning(
        read_log(GRPO),
        reading,
        checked,
        checked.shape,
        gpu=gpu,
        gpu_said=said,
        gpu_memory_gb=80.0,
        mean_response_tokens=None,
    )


def test_tune_gives_back_the_true_phase_times(tuned: Any) -> None:
    true = TRUTH["mean_phase_s_steps_3_on"]
    measured = tuned.measured
    assert (measured.first_step, measured.last_step, measured.warmup) == (3, 25, 2)
    assert measured.phases["train"] == pytest.approx(true["train_step"], rel=0.05)
    assert measured.phases["recompute_logp"] == pytest.approx(true["recompute_logp"], rel=0.05)
    assert measured.phases["update_weights"] == pytest.approx(true["update_weights"], rel=0.05)
    assert measured.rollout_wait == pytest.approx(true["rollout"], rel=0.05)
    # the run is generation-bound: generating a batch took the wait and the training
    generated = true["rollout"] + true["recompute_logp"] + true["train_step"]
    assert measured.generate == pytest.approx(generated, rel=0.05)
    walls = sorted(s["step_wall_s"] for s in TRUTH["steps"][2:])
    assert measured.step_seconds == pytest.approx(walls[len(walls) // 2], rel=0.05)
    responses = [s["tokens"]["response_tokens"] / s["tokens"]["n_seqs"] for s in TRUTH["steps"]]
    assert measured.mean_response_tokens == pytest.approx(sum(responses) / 25, rel=0.05)


def test_tune_recovers_the_factors_the_run_was_made_with(tuned: Any) -> None:
    true = TRUTH["mean_phase_s_steps_3_on"]
    predicted = tuned.predicted.phases
    factors = tuned.calibration
    training = true["recompute_logp"] + true["train_step"]
    assert factors.train == pytest.approx(
        training / (predicted["recompute_logp"] + predicted["train"]), rel=0.05
    )
    assert factors.update_weights == pytest.approx(
        true["update_weights"] / predicted["update_weights"], rel=0.05
    )
    generated = true["rollout"] + training
    assert factors.generate == pytest.approx(generated / predicted["generate"], rel=0.05)
    # make_runs.py made the run 1.6x, 1.25x and 30x the prediction of its day
    assert 1.3 < factors.generate < 2.0 and 1.0 < factors.train < 1.5
    assert 20 < factors.update_weights < 40
    # calibrated, the model gives back the run's step
    assert tuned.calibrated.step_seconds == pytest.approx(tuned.measured.step_seconds, rel=0.05)


def test_each_recommendation_passes_check(tuned: Any) -> None:
    assert tuned.recommendations
    best = tuned.recommendations[0]
    assert best.step.step_seconds <= tuned.calibrated.step_seconds
    for r in tuned.recommendations:
        argv = ["python", "train.py", "--config", str(CONFIG), *r.overrides]
        plan = check_command(argv, settings=SETTINGS)
        assert str(plan.engines["actor"].allocation) == r.actor
        assert str(plan.engines["rollout"].allocation) == r.rollout


def test_tune_json(cli: Cli) -> None:
    status, out, err = cli("tune", str(GRPO), "--config", str(CONFIG), "--gpu", "h100", "--json")
    assert status == 0, err
    found = json.loads(out)
    assert set(found) >= {"measured", "predicted", "calibration", "recommendations"}
    assert found["recommendations"][0]["overrides"]
    assert set(found["calibration"]["factors"]) == {*FACTOR_BOUNDS, "other_seconds"}


def test_tune_prints_now_and_the_best_layout(cli: Cli) -> None:
    status, out, err = cli("tune", str(GRPO), "--config", str(CONFIG), "--gpu", "h100")
    assert status == 0, err
    assert "generation-bound" in out and "on the same 4 GPUs" in out
    assert "(now)" in out


def _cut_in_first_table(tmp_path: Path) -> Path:
    text = (GRPO / TRUTH["log_file"]).read_bytes()
    at = text.index(b"timeperf/train_step")
    (tmp_path / "main.log").write_bytes(text[:at])
    return tmp_path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: RUNS / "sc_empty", "has no step's stats"),
        (_cut_in_first_table, "has no step's stats"),
        (lambda tmp: tmp / "nothing-here", "no such file or directory"),
        (lambda tmp: tmp, "has no AReaL log"),
        (
            lambda tmp: (tmp / "main.log").write_bytes(b"\x00\xff garbage \n" * 50) and tmp,
            "has no step's stats",
        ),
    ],
    ids=["empty", "truncated", "missing", "no-log", "binary"],
)
def test_a_log_tune_cannot_read_is_one_message_and_exit_2(
    cli: Cli, tmp_path: Path, make: Any, says: str
) -> None:
    run = make(tmp_path)
    status, out, err = cli("tune", str(run), "--config", str(CONFIG), "--gpu", "h100")
    assert status == 2 and out == ""
    assert says in err and "Traceback" not in err
    assert err.startswith("error: ") and err.count("error: ") == 1


def test_one_step_is_not_enough(tmp_path: Path) -> None:
    text = (GRPO / TRUTH["log_file"]).read_text()
    second = text.index("Train step 2/25 done.")
    (tmp_path / "main.log").write_text(text[: text.rindex("\n", 0, second)])
    log = read_log(tmp_path)
    assert len(log.steps) == 1
    with pytest.raises(AllocationError, match="a step's time is the gap between two"):
        measure(log, "asynchronous", 32)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=60),
            st.sampled_from(
                [
                    "(AReaL) 20260314-09:02:36.439 StatsLogger INFO: Epoch 1/1 Step 1/2 "
                    "Train step 1/2 done.",
                    "(AReaL) 20269914-99:02:36.439 StatsLogger INFO: Epoch 1/1 Step 1/2 "
                    "Train step 1/2 done.",
                    "│ timeperf/rollout │ 1.0e+00 │ timeperf/train_step │ nan │",
                    "│ x │ inf │",
                    "╘═══╛",
                ]
            ),
        ),
        max_size=30,
    )
)
def test_any_log_text_gives_steps_or_one_allocation_error(lines: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "main.log").write_text("\n".join(lines), encoding="utf-8")
        try:
            log = read_log(tmp)
        except AllocationError as err:
            assert str(err).strip()
            return
        assert log.steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.sampled_from(["events.out.tfevents.1.host", "traces-r0.jsonl"]))
def test_any_event_or_trace_bytes_give_steps_or_one_allocation_error(
    data: bytes, name: str
) -> None:
    import tempfile

    events = (PPO_DIR / "tensorboard").glob("events.out.tfevents.*")
    real = next(events).read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        for i, content in enumerate((data, real[: len(data)] + data)):
            path = Path(tmp) / f"{i}" / name
            path.parent.mkdir()
            path.write_bytes(content)
            try:
                log = read_log(path)
            except AllocationError as err:
                assert str(err).strip()
                continue
            assert log.steps


def test_the_fixtures_are_areal_s_own_output() -> None:
    """Each run records the AReaL commit and modules that wrote it."""
    for run in ("sc_grpo_25", "spmd_ppo_8"):
        truth = truth_of(run)
        assert truth["areal_commit"] == "cbff54d64"
        assert "areal/utils/stats_logger.py" in json.dumps(truth["areal_modules"])

"""One RL step as AReaL's trainer runs it (areal_conf.perf.rl_step): asynchronous,
synchronous and colocated runs of the same config, each with the terms it should have
(``areal/trainer/rl_trainer.py:640-966`` at AReaL cbff54d64)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from _helpers import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from areal_conf import AllocationError, Calibration, RLStep, rl_throughput
from areal_conf.command.argv import parse_config_command
from areal_conf.command.check import compose_as_areal
from areal_conf.perf.rl_step import PHASES, TRAINING_SIDE, compose
from areal_conf.settings import Settings
from areal_conf.validation import read_run, rl_step_of, validate_run

#: AReaL 2.0's GRPO example (asynchronous: max_head_offpolicyness 2), its actor and
#: rollout on GPUs of their own.
EXAMPLE = ["--config", "examples/math/gsm8k_grpo_megatron.yaml", "scheduler.type=local"]
SETTINGS = Settings(areal_version="2.0", gpu="h100", mean_response_tokens=512)
SEPARATE = ["actor.backend=fsdp:d4", "rollout.backend=sglang:d4"]
SYNCHRONOUS = [*SEPARATE, "rollout.max_head_offpolicyness=0"]
COLOCATED = [
    "actor.backend=fsdp:d8",
    "rollout.backend=sglang:d8",
    "++rollout.scheduling_strategy.type=colocation",
    "++rollout.scheduling_strategy.target=actor",
    "++actor.weight_update_mode=disk",
    "enable_offload=true",
]


@pytest.fixture(scope="module")
def reading() -> Any:
    command = parse_config_command(EXAMPLE, cwd=FIXTURES / "areal2")
    cfg = compose_as_areal(command, areal_version="2.0")
    return read_run(cfg, settings=SETTINGS)


def step(reading: Any, edits: list[str], calibration: Calibration | None = None) -> RLStep:
    return rl_step_of(validate_run(reading, edits), calibration)


def test_asynchronous_generation_overlaps_training(reading: Any) -> None:
    s = step(reading, SEPARATE)
    assert s.mode == "asynchronous"
    # the example recomputes log-probabilities (use_decoupled_loss), has no ref (kl_ctl 0)
    assert set(s.phases) == {"generate", "recompute_logp", "train", "update_weights"}
    training = s.phases["recompute_logp"] + s.phases["train"]
    generate = s.phases["generate"]
    assert s.step_seconds == pytest.approx(max(generate, training) + s.phases["update_weights"])
    assert s.rollout_wait == pytest.approx(max(0.0, generate - training))
    assert s.bound == ("generation" if generate > training else "training")
    assert s.tokens_per_s == pytest.approx(s.tokens_per_step / s.step_seconds)


def test_synchronous_steps_add_up_and_wait_for_the_longest_response(reading: Any) -> None:
    s = step(reading, SYNCHRONOUS)
    overlapped = step(reading, SEPARATE)
    assert s.mode == "synchronous"
    assert set(s.phases) == set(overlapped.phases)
    assert s.step_seconds == pytest.approx(sum(s.phases.values()))
    assert s.rollout_wait == pytest.approx(s.phases["generate"])
    # the batch waits for its longest response: at least as long as generating it
    # continuously, with fewer sequences at once (one batch, not three)
    assert s.phases["generate"] >= overlapped.phases["generate"]
    assert s.step_seconds > overlapped.step_seconds


def test_colocated_steps_offload_and_onload(reading: Any) -> None:
    s = step(reading, COLOCATED)
    assert s.mode == "colocated"
    assert {"offload", "onload"} <= set(s.phases)
    assert s.phases["offload"] == s.phases["onload"] > 0
    assert s.step_seconds == pytest.approx(sum(s.phases.values()))
    # AReaL updates a colocated rollout through the disk: not priced, and said
    assert "update_weights" not in s.phases
    assert any("weight_update_mode=disk" in n for n in s.not_counted)


def test_a_ref_adds_its_forward_pass(reading: Any) -> None:
    without = step(reading, SEPARATE)
    with_ref = step(reading, [*SEPARATE, "actor.kl_ctl=0.1"])
    assert "ref_logp" not in without.phases
    assert with_ref.phases["ref_logp"] > 0
    # a forward pass over the batch costs less than its training
    assert with_ref.phases["ref_logp"] < with_ref.phases["train"]


def test_no_recompute_without_decoupled_loss_or_recompute_logprob(reading: Any) -> None:
    s = step(
        reading, [*SEPARATE, "actor.use_decoupled_loss=false", "actor.recompute_logprob=false"]
    )
    assert "recompute_logp" not in s.phases
    skipped = step(reading, [*SEPARATE, "++actor.prox_logp_method=loglinear"])
    assert "recompute_logp" not in skipped.phases


def test_the_weight_update_crosses_the_network_between_nodes(reading: Any) -> None:
    one_node = step(reading, SEPARATE)
    two_nodes = step(
        reading,
        [
            "scheduler.type=slurm",
            "cluster.n_nodes=2",
            "actor.backend=fsdp:d8",
            "rollout.backend=sglang:d8",
        ],
    )
    assert two_nodes.phases["update_weights"] > one_node.phases["update_weights"]


def test_a_calibration_scales_each_kind_of_phase(reading: Any) -> None:
    plain = step(reading, SEPARATE)
    factors = Calibration(generate=2.0, train=3.0, update_weights=10.0, other_seconds=1.5)
    scaled = step(reading, SEPARATE, factors)
    assert scaled.phases["generate"] == pytest.approx(2 * plain.phases["generate"])
    for phase in ("recompute_logp", "train"):
        assert scaled.phases[phase] == pytest.approx(3 * plain.phases[phase])
    assert scaled.phases["update_weights"] == pytest.approx(10 * plain.phases["update_weights"])
    assert scaled.phases["other"] == 1.5


def test_the_plan_and_its_json_carry_the_step(reading: Any) -> None:
    checked = validate_run(reading, SEPARATE)
    assert checked.rl_step is not None
    assert checked.rl_step.step_seconds == pytest.approx(rl_step_of(checked).step_seconds)
    carried = checked.to_dict()["rl_step"]
    assert carried["mode"] == "asynchronous"
    assert set(carried["phases"]) == set(checked.rl_step.phases)


def test_rl_throughput_on_a_config_without_a_batch_says_why() -> None:
    cfg = {
        "rollout": {"backend": "sglang:d4"},
        "actor": {"backend": "fsdp:d4", "gradient_checkpointing": True},
        "cluster": {"n_nodes": 1, "n_gpus_per_node": 8},
    }
    with pytest.raises(AllocationError, match=r"train_dataset\.batch_size"):
        rl_throughput(
            cfg,
            areal_version="2.0",
            settings=Settings(model={"hf_config": "Qwen/Qwen3-8B"}, gpu="h100"),
        )


@pytest.mark.parametrize(
    ("mode", "phases", "expected"),
    [
        # (step, wait, bound)
        ("asynchronous", {"generate": 10.0, "train": 4.0, "update_weights": 1.0}, (11, 6, "g")),
        ("asynchronous", {"generate": 2.0, "train": 4.0, "update_weights": 1.0}, (5, 0, "t")),
        ("synchronous", {"generate": 2.0, "train": 4.0, "update_weights": 1.0}, (7, 2, "t")),
        ("colocated", {"generate": 5.0, "train": 4.0, "offload": 1.0, "onload": 1.0}, (11, 5, "g")),
    ],
)
def test_compose(mode: Any, phases: dict[str, float], expected: tuple[float, float, str]) -> None:
    seconds, wait, bound = compose(mode, phases)
    assert (seconds, wait, bound[0]) == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(["asynchronous", "synchronous", "colocated"]),
    seconds=st.dictionaries(
        st.sampled_from(PHASES), st.floats(0, 1e6, allow_nan=False), max_size=len(PHASES)
    ),
)
def test_a_step_is_at_least_its_longest_side_and_at_most_their_sum(
    mode: Any, seconds: dict[str, float]
) -> None:
    total, wait, _ = compose(mode, seconds)
    training = sum(seconds.get(p, 0.0) for p in TRAINING_SIDE)
    rest = sum(s for p, s in seconds.items() if p != "generate" and p not in TRAINING_SIDE)
    generate = seconds.get("generate", 0.0)
    assert math.isfinite(total) and wait >= 0
    assert max(generate, training) + rest <= total * (1 + 1e-12) + 1e-9
    assert total <= generate + training + rest + 1e-6 * (1 + total)


# -- the teacher's log-probabilities (rl_trainer.py:748-766) ----------------------------

#: AReaL 2.0's distillation example: Qwen3-0.6B learns from Qwen2.5-14B-Instruct, served
#: by vllm:t2 (``teacher.engine_type: rollout``).
DISTILL = [
    "--config",
    "examples/distillation/gsm8k_grpo_distill_mode_rolloutEngine.yaml",
    "scheduler.type=local",
    "cluster.n_gpus_per_node=8",
]


def _read(argv: list[str], version: str = "2.0") -> Any:
    command = parse_config_command(argv, cwd=FIXTURES / "areal2")
    cfg = compose_as_areal(command, areal_version=version)
    return read_run(cfg, settings=Settings(areal_version=version, gpu="h100"))


def test_an_inference_teacher_prefills_the_batch_with_its_own_model() -> None:
    reading = _read(DISTILL)
    s = step(reading, [])
    assert s.phases["teacher_logp"] > 0 and not s.not_counted
    # its own model, read from teacher.path: Qwen2.5-14B (48 layers), not the actor's
    teacher = validate_run(reading).engines["teacher"]
    assert teacher.own_shape is not None and teacher.own_shape.num_layers == 48
    # the trajectories spread over the servers: twice the instances, half the time
    wider = step(reading, ["teacher.rollout.backend=vllm:d2t2"])
    assert wider.phases["teacher_logp"] == pytest.approx(s.phases["teacher_logp"] / 2, rel=0.05)
    # the actor's own 0.6B model as the teacher: far fewer FLOPs a token
    small = step(reading, ["teacher.path=Qwen/Qwen3-0.6B"])
    assert small.phases["teacher_logp"] < s.phases["teacher_logp"] / 10


def test_a_training_teacher_runs_a_forward_pass() -> None:
    """AReaL 1.0's flat teacher (a train engine): a forward pass over the batch, in its
    micro-batches, with its own model."""
    reading = _read(
        [
            "--config",
            "examples/distillation/gsm8k_grpo_distill_mode_trainEngine.yaml",
            "cluster.n_gpus_per_node=8",
        ],
        version="1.0",
    )
    s = step(reading, [])
    wider = step(reading, ["teacher.backend=fsdp:d2t4", "cluster.n_nodes=2"])
    assert 0 < wider.phases["teacher_logp"] < s.phases["teacher_logp"]
    assert not s.not_counted

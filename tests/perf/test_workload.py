"""What one training step works on, per AReaL trainer (``areal_conf.perf.workload``): which
trainer a config is for, the sequences, lengths and optimizer steps of its step, what
the plan's ``s/step`` line and ``suggest`` say they assumed, and the critic that the
rollout/actor split counts.

AReaL 2.0 (cbff54d64) is the source of each row:

- the trainer, from the keys only its config class has (``areal/api/cli_args.py``:
  ``SFTConfig`` 3274-3278 actor only, ``RWConfig`` 3281-3293 requires
  ``actor.is_critic``, ``DPOConfig`` 3325-3339 actor and ref, ``PPOConfig`` 3396-3464
  gconfig, rollout, critic, teacher);
- RL: ``batch_size × n_samples`` sequences in ``ppo_n_minibatches`` optimizer steps
  (``areal/trainer/ppo/actor.py:454-464``, ``ppo/critic.py:61-66``);
- SFT: ``batch_size`` sequences trained whole, one ``train_batch`` = one optimizer step
  (``sft/lm_engine.py:27-34``, ``engine/fsdp_engine.py:774-812``);
- RW and DPO: pairs, two sequences each (``rw_trainer.py:54-73``,
  ``dpo/dpo_engine.py:97-101``), one optimizer step; DPO's ref computes log-probabilities
  first (``dpo_trainer.py:235-250``);
- the length: ``train_dataset.max_length``, longer sequences dropped
  (``areal/dataset/gsm8k.py:24-26``, ``hhrlhf.py:21-28``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT

from areal_conf import AllocationError
from areal_conf.advise.suggest import suggest, suggestion_text
from areal_conf.advise.sweeps import engine_layouts
from areal_conf.areal.versions import choose_rules
from areal_conf.command.argv import parse_config_command
from areal_conf.command.check import check_command, compose_as_areal
from areal_conf.config.reading import read_config
from areal_conf.config.run_config import RunConfig
from areal_conf.model.hardware import hardware
from areal_conf.model.shape import ModelShape, shape_of
from areal_conf.perf.ranking import Critic, rl_split
from areal_conf.perf.speed import TrainingStep, recomputing, training_step
from areal_conf.perf.workload import NoWorkload, StepWorkload, step_workload
from areal_conf.plan.report import plan_table
from areal_conf.settings import Settings
from areal_conf.validation import read_run, validate_run

FIXTURES = ROOT / "tests" / "fixtures"
AREAL2 = FIXTURES / "areal2"
SFT = AREAL2 / "examples" / "math" / "gsm8k_sft.yaml"
DPO = AREAL2 / "examples" / "alignment" / "hhrlhf_dpo.yaml"
RL = AREAL2 / "examples" / "math" / "gsm8k_grpo_megatron.yaml"
RW = FIXTURES / "workloads" / "hhrlhf_rw.yaml"
PPO = FIXTURES / "workloads" / "gsm8k_ppo.yaml"  # a critic colocated with the actor
DRIVER = ("python", str(ROOT / "tests" / "standin_driver.py"))


def run_of(yaml: Path, *overrides: str) -> RunConfig:
    """The config as AReaL composes ``--config yaml overrides``, read under 2.0's rules."""
    cfg = compose_as_areal(parse_config_command(["--config", str(yaml), *overrides], cwd=ROOT))
    return read_config(cfg, choose_rules("2.0").rules)


# -- which trainer ----------------------------------------------------------------------

BASE: dict[str, Any] = {"actor": {"backend": "fsdp:d8"}, "train_dataset": {"batch_size": 8}}


@pytest.mark.parametrize(
    "config,trainer",
    [
        (SFT, "sft"),  # actor only
        (RW, "rw"),  # actor.is_critic: true
        (DPO, "dpo"),  # a ref, no gconfig or rollout
        (RL, "rl"),
        (BASE, "sft"),
        ({**BASE, "actor": {"backend": "fsdp:d8", "is_critic": True}}, "rw"),
        ({**BASE, "actor": {"backend": "fsdp:d8", "is_critic": False}}, "sft"),
        ({**BASE, "ref": {"backend": "fsdp:d8"}}, "dpo"),
        ({**BASE, "ref": None}, "sft"),  # a null section is no engine
        ({**BASE, "gconfig": {"n_samples": 4}}, "rl"),  # PPOConfig's key, even alone
        ({**BASE, "dynamic_bs": True}, "rl"),
        ({**BASE, "critic": {"backend": "fsdp:d8"}}, "rl"),
        ({**BASE, "rollout": {"backend": "sglang:d8"}}, "rl"),
        ({**BASE, "rollout": {"backend": "sglang:d8"}, "ref": {"backend": "fsdp:d8"}}, "rl"),
    ],
)
def test_the_trainer_is_read_from_the_keys_only_its_config_class_has(
    config: Path | dict[str, Any], trainer: str
) -> None:
    run = run_of(config) if isinstance(config, Path) else read_config(config, choose_rules().rules)
    assert run.trainer == trainer


# -- the workload of each trainer ---------------------------------------------------------


@pytest.mark.parametrize(
    "yaml,overrides,sequences,length,steps,microbatch,says",
    [
        # 128 sequences trained whole; no ppo_n_minibatches, no generation
        (
            SFT,
            ("+train_dataset.max_length=1024",),
            128,
            1024,
            1,
            4096,
            "SFT: 128 sequences of 1,024 tokens (assumed: all of train_dataset.max_length)",
        ),
        # 256 pairs: a chosen and a rejected sequence each
        (
            RW,
            ("+train_dataset.max_length=2048",),
            512,
            2048,
            1,
            4096,
            "RW (reward model): 256 pairs = 512 sequences (chosen and rejected) of 2,048 tokens",
        ),
        (
            DPO,
            (),
            128,
            2048,
            1,
            4096,
            "DPO: 64 pairs = 128 sequences (chosen and rejected) of 2,048 tokens (assumed: all "
            "of train_dataset.max_length); the ref's forward pass over them not counted",
        ),
        # without mb_spec.max_tokens_per_mb a micro-batch is one longest sequence
        (SFT, ("+train_dataset.max_length=1024", "~actor.mb_spec"), 128, 1024, 1, 1024, "SFT"),
        # RL, as before: 256 prompts × 4 samples of 1,024 + 1,024/2 tokens
        (
            RL,
            ("actor.ppo_n_minibatches=2",),
            1024,
            1536,
            2,
            10240,
            "RL: 256 prompts × 4 samples, prompts of 1,024 tokens (train_dataset.max_length), "
            "mean response 512 tokens (assumed: half of gconfig.max_new_tokens; "
            "--mean-response-tokens)",
        ),
        (
            RL,
            ("~train_dataset.max_length",),
            1024,
            512,
            1,
            10240,
            "prompts of 0 tokens (no train_dataset.max_length)",
        ),
    ],
)
def test_each_trainer_trains_its_own_sequences(
    yaml: Path,
    overrides: tuple[str, ...],
    sequences: int,
    length: int,
    steps: int,
    microbatch: int,
    says: str,
) -> None:
    run = run_of(yaml, *overrides)
    step = training_step(run, run.engines["actor"])
    assert isinstance(step, TrainingStep) and isinstance(step.workload, StepWorkload)
    assert (step.workload.sequences, step.workload.sequence_tokens) == (sequences, length)
    assert step.tokens_per_batch == sequences * length
    assert (step.optimizer_steps, step.tokens_per_microbatch) == (steps, microbatch)
    text = step.describe("h100")
    assert says in text
    assert f"{sequences * length:,} tokens a step in {steps} optimizer step" in text
    if run.trainer != "rl":
        assert "mean response" not in text and step.workload.generated_tokens == 0


def test_the_mean_response_is_rl_only() -> None:
    said = run_of(RL)
    step = training_step(said, said.engines["actor"], mean_response_tokens=1000)
    assert isinstance(step, TrainingStep)
    assert step.tokens_per_batch == 256 * 4 * (1024 + 1000)
    assert "mean response 1,000 tokens (--mean-response-tokens)" in step.describe("h100")
    sft = run_of(SFT, "+train_dataset.max_length=1024")
    assert training_step(sft, sft.engines["actor"], 1000) == training_step(
        sft, sft.engines["actor"]
    )


@pytest.mark.parametrize(
    "yaml,overrides,reason,fix",
    [
        (
            SFT,
            (),
            "no train_dataset.max_length: SFT trains sequences as long as the dataset makes them",
            "++train_dataset.max_length=<tokens>",
        ),
        (
            RW,
            (),
            "no train_dataset.max_length: RW (reward model) trains sequences as long as",
            "++train_dataset.max_length=<tokens>",
        ),
        (
            SFT,
            ("~train_dataset",),
            "no train_dataset.batch_size",
            "++train_dataset.batch_size=<sequences a step>",
        ),
        (DPO, ("~train_dataset",), "no", "<pairs a step>"),
        (RL, ("~train_dataset", "rollout.consumer_batch_size=8"), "no", "<prompts a step>"),
    ],
)
def test_no_prediction_says_which_key_is_missing(
    yaml: Path, overrides: tuple[str, ...], reason: str, fix: str
) -> None:
    run = run_of(yaml, *overrides)
    work = step_workload(run)
    assert isinstance(work, NoWorkload)
    assert work.reason.startswith(reason) and fix in work.fix
    assert training_step(run, run.engines["actor"]) == work.reason


def test_the_reported_sft_command_gets_sft_numbers_not_rl_ones() -> None:
    """``check -- python D --config gsm8k_sft.yaml scheduler.type=local`` printed "mean
    response 8,192 tokens, 4 optimizer steps" from gconfig and ppo_n_minibatches
    defaults that SFTConfig does not have."""
    argv = [*DRIVER, "--config", str(SFT), "scheduler.type=local"]
    plan = check_command(argv, cwd=ROOT, settings=Settings(areal_version="2.0"))
    # no max_length: the sequences' length is the dataset's, so no time is predicted
    assert plan.engines["actor"].step_seconds is None
    assert "s/step" not in plan_table(plan)
    plan = check_command([*argv, "+train_dataset.max_length=1024"], cwd=ROOT)
    assert plan.engines["actor"].step_seconds is not None
    note = plan.speed_note
    assert "SFT: 128 sequences of 1,024 tokens" in note
    assert "131,072 tokens a step in 1 optimizer step" in note
    assert "mean response" not in note and "prompts" not in note
    assert "s/step" in plan_table(plan) and note in plan_table(plan)


def test_the_plan_says_each_engines_optimizer_steps_when_they_differ() -> None:
    argv = [*DRIVER, "--config", str(PPO), "scheduler.type=local"]
    same = check_command(argv, cwd=ROOT).speed_note
    assert same.endswith("1,572,864 tokens a step in 1 optimizer step")
    note = check_command([*argv, "critic.ppo_n_minibatches=2"], cwd=ROOT).speed_note
    assert note.endswith("in 1 optimizer step (actor), 2 optimizer steps (critic)")


def test_ranking_an_sft_config_by_step_time_asks_for_its_sequence_length() -> None:
    cfg: dict[str, Any] = {
        "actor": {"backend": "fsdp:d8"},
        "model": {"hf_config": str(FIXTURES / "hf" / "qwen2_5_7b")},
        "train_dataset": {"batch_size": 32},
    }
    with pytest.raises(AllocationError) as err:
        engine_layouts(cfg, "actor", rank="step_time")
    assert "no train_dataset.max_length: SFT trains sequences as long" in err.value.reason
    assert "++train_dataset.max_length=<tokens>" in err.value.hint
    cfg["train_dataset"]["max_length"] = 2048
    ranked = engine_layouts(cfg, "actor", rank="step_time")
    assert ranked.speed_note.startswith("s/step: predicted on")
    assert "SFT: 32 sequences of 2,048 tokens" in ranked.speed_note


def test_a_pair_costs_two_sequences() -> None:
    """Same model, GPUs and batch size: RW's step trains twice SFT's sequences."""
    sft = run_of(SFT, "+train_dataset.max_length=2048", "train_dataset.batch_size=256")
    rw = run_of(RW, "+train_dataset.max_length=2048")
    shape = shape_of({"hf_config": str(FIXTURES / "hf" / "qwen2_5_7b")})
    seconds = []
    for run in (sft, rw):
        step = training_step(run, run.engines["actor"])
        assert isinstance(step, TrainingStep)
        seconds.append(step.predict("fsdp:d8", shape, "h100").batch_seconds)
    assert seconds[1] == pytest.approx(2 * seconds[0], rel=0.05)


# -- suggest and the rollout/actor split -------------------------------------------------


def test_suggest_on_sft_says_what_it_assumed() -> None:
    reading = read_run(
        compose_as_areal(
            parse_config_command(
                ["--config", str(SFT), "+train_dataset.max_length=1024", "scheduler.type=local"],
                cwd=ROOT,
            )
        ),
        settings=Settings(areal_version="2.0"),
    )
    plan = validate_run(reading)
    shape = shape_of({"hf_config": str(FIXTURES / "hf" / "qwen2_5_7b")})
    assert isinstance(shape, ModelShape)
    found = suggest(
        reading, plan, shape, gpu=hardware("h100"), gpu_said="h100", gpu_memory_gb=80.0, top=2
    )
    text = suggestion_text(found)
    assert "SFT: 128 sequences of 1,024 tokens" in text and "mean response" not in text
    assert found.rollout is None and found.split is None


SPLIT: dict[str, Any] = {
    "gpu": "h100",
    "total_gpus": 8,
    "batch_size": 128,
    "n_samples": 8,
    "max_new_tokens": 4096,
    "prompt_tokens": 1024,
    "tokens_per_microbatch": 16384,
    "recompute": "full",
}
QWEN_7B = {"hf_config": str(FIXTURES / "hf" / "qwen2_5_7b")}


def test_a_critic_on_the_actors_gpus_counts_in_the_split() -> None:
    """PPO with a critic colocated with the actor: AReaL runs the critic's values pass
    and its training in turn with the actor's training (rl_trainer.py: compute_values,
    then actor.ppo_update, then critic.ppo_update), on the same GPUs."""
    alone = rl_split(QWEN_7B, **SPLIT)
    critic = Critic(backend="fsdp", ppo_n_minibatches=4, recompute="full")
    both = rl_split(QWEN_7B, **SPLIT, critic=critic)
    assert [o.actor_gpus for o in both.options] == [o.actor_gpus for o in alone.options]
    shape = shape_of(QWEN_7B)
    for a, b in zip(alone.options, both.options, strict=True):
        assert b.critic is not None and b.critic.startswith("fsdp:")
        assert b.critic_s > 0 and b.train_s == pytest.approx(a.train_s + b.critic_s)
        assert b.generate_s == a.generate_s
        # its values pass (a forward over the batch) and its training, on its layout
        step = TrainingStep(
            tokens_per_batch=128 * 8 * (1024 + 2048),
            optimizer_steps=4,
            tokens_per_microbatch=16384,
            recompute_by_backend=recomputing("full"),
        )
        train = step.predict(b.critic, shape, "h100").batch_seconds
        values = step.predict(b.critic, shape, "h100", forward_only=True).batch_seconds
        assert b.critic_s == pytest.approx(train + values)
        assert values < train
    # training takes longer, so the best split gives the training side more GPUs
    assert both.best.actor_gpus > alone.best.actor_gpus
    assert (
        "the critic's values pass and training (on the actor's GPUs)"
        in (both.assumptions["counted"])
    )
    assert "critic" in alone.assumptions["counted"].split("not ")[1]


def test_a_critic_on_gpus_of_its_own_adds_the_same_time_to_every_split() -> None:
    own = rl_split(QWEN_7B, **SPLIT, critic=Critic(layout="fsdp:d8", recompute="full"))
    assert {o.critic for o in own.options} == {"fsdp:d8"}
    assert len({round(o.critic_s, 9) for o in own.options}) == 1


@pytest.mark.parametrize(
    "overrides,counted",
    [
        ((), "actor"),  # AReaL's gsm8k_ppo.yaml: the critic colocated with the actor
        (("critic.scheduling_strategy.type=separation", "cluster.n_gpus_per_node=12"), "own"),
        (("critic=null",), None),
    ],
)
def test_suggest_counts_the_critic_in_the_split(
    overrides: tuple[str, ...], counted: str | None
) -> None:
    argv = ["--config", str(PPO), "scheduler.type=local", *overrides]
    cfg = compose_as_areal(parse_config_command(argv, cwd=ROOT))
    reading = read_run(cfg, settings=Settings(areal_version="2.0"))
    plan = validate_run(reading)
    shape = shape_of({"hf_config": "Qwen/Qwen2.5-1.5B-Instruct"})
    found = suggest(
        reading, plan, shape, gpu=hardware("h100"), gpu_said="h100", gpu_memory_gb=80.0, top=1
    )
    assert found.split is not None
    # the split's table, printed when the whole step is not predicted
    text = suggestion_text(dataclasses.replace(found, rl_layouts=()))
    options = found.split.options
    if counted is None:
        assert all(o.critic is None and o.critic_s == 0 for o in options)
        assert "critic layout" not in text
        return
    assert all(o.critic is not None and o.critic_s > 0 for o in options)
    assert "critic layout" in text and "critic's values pass and training" in text
    if counted == "actor":  # moves with the actor's GPUs
        assert all(o.critic == o.actor for o in options)  # same backend, same model
        assert "(on the actor's GPUs)" in text
    else:  # its own 4 GPUs, whatever the split
        assert {o.critic for o in options} == {"fsdp:d4"} and "(on fsdp:d4)" in text


# -- AReaL's own loader: every key read exists in that trainer's config class ------------

# As tests/test_areal_loader.py finds it: AREAL_LOADER_DIR (no default) is the tool's
# directory, AREAL_LOADER_HOME holds its venv and AReaL's source; without them, skipped.
HOME = Path(os.environ.get("AREAL_LOADER_HOME", Path.home() / ".cache" / "areal-loader"))
LOADER_DIR = os.environ.get("AREAL_LOADER_DIR", "")
LOADER = Path(LOADER_DIR or "areal_loader-not-set") / "load.py"
PYTHON = HOME / "venv" / "bin" / "python"
SRC = HOME / "areal-src"

#: The keys each trainer's workload reads (and that tell the trainers apart), set with
#: ``++`` so that AReaL's strict merge refuses any its config class lacks.
COMMON = (
    "++train_dataset.batch_size=64",
    "++train_dataset.max_length=1024",
    "++actor.mb_spec.max_tokens_per_mb=4096",
    "++actor.gradient_checkpointing=true",
)
READS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "sft": ("examples/math/gsm8k_sft.yaml", "SFTConfig", ("++actor.is_critic=false",)),
    "rw": ("examples/alignment/hhrlhf_rw.yaml", "RWConfig", ("++actor.is_critic=true",)),
    "dpo": ("examples/alignment/hhrlhf_dpo.yaml", "DPOConfig", ("++ref.mb_spec.n_mbs=1",)),
    "rl": (
        "examples/math/gsm8k_ppo.yaml",
        "GRPOConfig",
        (
            "++gconfig.n_samples=4",
            "++gconfig.max_new_tokens=1024",
            "++eval_gconfig.n_samples=1",
            "++dynamic_bs=false",
            "++actor.ppo_n_minibatches=2",
            "++rollout.max_concurrent_rollouts=64",
            "++rollout.max_head_offpolicyness=2",
            "++critic.ppo_n_minibatches=2",
            "++critic.mb_spec.max_tokens_per_mb=4096",
            "++critic.gradient_checkpointing=true",
        ),
    ),
}
#: Keys that belong to another trainer: AReaL refuses them (so the trainer read from them
#: is the only one that could load the config).
REFUSED: tuple[tuple[str, str], ...] = (
    ("sft", "++gconfig.n_samples=4"),
    ("sft", "++actor.ppo_n_minibatches=2"),
    ("sft", "++ref.mb_spec.n_mbs=1"),
    ("rw", "++rollout.max_concurrent_rollouts=64"),
    ("rw", "++dynamic_bs=false"),
    ("dpo", "++gconfig.max_new_tokens=1024"),
    ("dpo", "++critic.ppo_n_minibatches=2"),
)


def _areal_loads(yaml: str, cls: str, overrides: Sequence[str]) -> dict[str, Any]:
    """AReaL's verdict on its example ``yaml`` loaded as ``cls`` with ``overrides``."""
    argv = [str(PYTHON), str(LOADER), "--areal-src", str(SRC), "--cls", cls, str(SRC / yaml)]
    result = subprocess.run(
        [*argv, "--", *overrides],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr
    verdict: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return verdict


@pytest.mark.e2e
@pytest.mark.skipif(
    not (LOADER_DIR and PYTHON.exists() and LOADER.exists() and (SRC / "examples").is_dir()),
    reason="AReaL's loader is not set up: set AREAL_LOADER_DIR to the areal_loader tool's "
    f"directory and build its venv with its setup.sh (AREAL_LOADER_HOME={HOME})",
)
def test_areal_has_every_key_each_trainer_reads_and_no_other_trainers() -> None:
    runs = [(READS[t][0], READS[t][1], (*COMMON, *READS[t][2]), True) for t in READS]
    runs += [(READS[t][0], READS[t][1], (*COMMON, key), False) for t, key in REFUSED]
    with ThreadPoolExecutor(max_workers=2) as pool:
        verdicts = list(pool.map(lambda r: _areal_loads(r[0], r[1], r[2]), runs))
    for (_, cls, overrides, loads), verdict in zip(runs, verdicts, strict=True):
        if loads:
            assert verdict["ok"], (cls, overrides, verdict["error_first_line"])
        else:
            assert not verdict["ok"], (cls, overrides[-1])
            assert "ConfigKeyError" in str(verdict["error_type"]), verdict


def test_a_mean_response_longer_than_any_response_is_cut_and_said() -> None:
    """``--mean-response-tokens 5000`` on ``gconfig.max_new_tokens: 1024``: no response is
    longer than 1,024 tokens, so neither is their mean."""
    from areal_conf.perf.workload import rl_workload

    cut = rl_workload(
        batch_size=8, n_samples=4, max_new_tokens=1024, prompt_tokens=512, mean_response_tokens=5000
    )
    assert cut.mean_response_tokens == 1024 and cut.sequence_tokens == 512 + 1024
    assert "mean response 1,024 tokens (--mean-response-tokens 5,000, cut to" in cut.describe()
    kept = rl_workload(
        batch_size=8, n_samples=4, max_new_tokens=1024, prompt_tokens=512, mean_response_tokens=300
    )
    assert kept.mean_response_tokens == 300 and "cut to" not in kept.describe()

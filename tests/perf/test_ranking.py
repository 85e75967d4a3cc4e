"""Which layout is fastest, as users see it: ``layouts --rank``, ``suggest``, the plan's
``s/step`` column, and the training step a config describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _helpers import ROOT

from areal_conf import AllocationError, check_command
from areal_conf.areal.versions import choose_rules
from areal_conf.cli import main
from areal_conf.config.reading import read_config
from areal_conf.model.shape import shape_of
from areal_conf.perf.speed import TrainingStep, training_step
from areal_conf.settings import Settings, from_environment
from areal_conf.validation import validate

HF = ROOT / "tests" / "fixtures" / "hf"
AREAL2 = ROOT / "tests" / "fixtures" / "areal2"
MEGATRON_YAML = "examples/math/gsm8k_grpo_megatron.yaml"
MOE = ["--model", f"hf_config={HF / 'qwen3_30b_a3b'}"]
RANK = ["layouts", "megatron", "--gpus", "64", *MOE, "--rank", "--max-tokens-per-mb", "16384"]


def _rows(out: str) -> list[list[str]]:
    """The ranked table's rows (after the header), split on runs of two spaces."""
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["#", "layout"]
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines[1:-1]]


def test_layouts_rank_sorts_by_predicted_step_time_with_memory_beside(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(RANK) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert len(rows) > 100
    fitting = [r for r in rows if "does not fit" not in r[4]]
    others = [r for r in rows if "does not fit" in r[4]]
    assert rows == fitting + others and fitting and others  # fitting first
    times = [float(r[2].replace(",", "")) for r in fitting]
    assert times == sorted(times)
    assert all(float(r[4]) <= 80 for r in fitting)
    assert out.splitlines()[-1].startswith("predicted on h100 (assumed")
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))


def test_layouts_rank_top_and_fits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(RANK) == 0
    every = _rows(capsys.readouterr().out)
    assert main([*RANK, "--top", "4"]) == 0
    top = _rows(capsys.readouterr().out)
    assert [r[1] for r in top] == [r[1] for r in every[:4]]
    assert main([*RANK, "--fits"]) == 0
    fits = _rows(capsys.readouterr().out)
    assert all("does not fit" not in r[4] for r in fits) and len(fits) < len(every)
    assert main([*RANK, "--top", "3", "--hydra"]) == 0
    from areal_conf.overrides import shell_sweep_override

    expected = shell_sweep_override("actor.backend", [r[1] for r in every[:3]])
    assert capsys.readouterr().out.strip() == expected


def test_layouts_rank_on_a_faster_gpu_is_faster(capsys: pytest.CaptureFixture[str]) -> None:
    times = {}
    for gpu in ("a100", "b200"):
        assert main([*RANK, "--top", "1", "--gpu", gpu]) == 0
        times[gpu] = float(_rows(capsys.readouterr().out)[0][2])
    assert times["b200"] < times["a100"]


def test_layouts_rank_of_an_inference_backend_ranks_decode_throughput(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["layouts", "sglang", "--gpus", "8", *MOE, "--rank", "--context-tokens", "4096"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[1:-1]]
    rates = [float(r[2].replace(",", "")) for r in rows]
    assert rates == sorted(rates, reverse=True) and len(rates) >= 3
    assert "prefill not counted" in out.splitlines()[-1]


def test_layouts_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "layouts.png"
    assert main([*RANK, "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.splitlines()[-1] == f"plot written to {target}"


BAD_RANK: list[tuple[list[str], str, str]] = [
    (["layouts", "fsdp", "--gpus", "8", "--top", "2"], "--top and --plot rank", "add --rank"),
    (["layouts", "megatron", "--gpus", "8", "--fp8", "delayed"], "--fp8 prices", "add --rank"),
    (["layouts", "fsdp", "--gpus", "8", "--rank"], "model shape unknown", "hidden_size"),
    ([*RANK, "--top", "0"], "top must be a positive integer", "e.g. 5"),
    ([*RANK, "--tokens-per-step", "0"], "tokens_per_step must be a positive integer", "above 0"),
    ([*RANK, "--gpu", "v100"], "'v100' is not a GPU areal-conf knows", "give one of"),
    ([*RANK, "--plot", "x.svg"], "--plot writes a PNG file", ".png"),
    ([*RANK, "--gpu-memory-gb", "-1"], "--gpu-memory-gb: must be a positive number", "=80"),
    (
        [
            "layouts",
            "megatron",
            "--gpus",
            "8",
            "--rank",
            "--model",
            "num_layers=4",
            "hidden_size=64",
            "num_attention_heads=4",
            "ffn_hidden_size=128",
            "vocab_size=100",
        ],
        "--rank needs the tokens of a micro-batch",
        "--max-tokens-per-mb",
    ),
]


@pytest.mark.parametrize("argv,reason,hint", BAD_RANK, ids=[b[1] for b in BAD_RANK])
def test_layouts_rank_bad_input_is_one_message(
    argv: list[str], reason: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert reason in err and hint in err
    assert "Traceback" not in err


# -- the config's training step and the plan's column ------------------------------------


def _areal2(overrides: tuple[str, ...] = ()) -> Any:
    from areal_conf.command.argv import parse_config_command
    from areal_conf.command.check import compose_as_areal

    return compose_as_areal(
        parse_config_command(["--config", MEGATRON_YAML, *overrides], cwd=AREAL2)
    )


def test_the_training_step_is_read_from_batch_samples_and_lengths() -> None:
    cfg = _areal2()
    run = read_config(cfg, choose_rules("2.0").rules)
    step = training_step(run, run.engines["actor"])
    assert isinstance(step, TrainingStep)
    # 256 prompts × 4 samples × (1024 prompt + 1024/2 mean response) tokens
    assert step.tokens_per_batch == 256 * 4 * (1024 + 512)
    assert step.tokens_per_microbatch == 10240
    assert step.optimizer_steps == run.engines["actor"].ppo_n_minibatches
    longer = training_step(run, run.engines["actor"], mean_response_tokens=1000)
    assert isinstance(longer, TrainingStep) and longer.tokens_per_batch == 256 * 4 * 2024
    # without batch_size, AReaL's default: one prompt (areal/api/cli_args.py:3097-3099)
    cfg = _areal2(("~train_dataset.batch_size", "rollout.consumer_batch_size=8"))
    run = read_config(cfg, choose_rules("2.0").rules)
    one = training_step(run, run.engines["actor"])
    assert isinstance(one, TrainingStep) and one.tokens_per_batch == 1 * 4 * (1024 + 512)
    cfg = _areal2(("~train_dataset", "rollout.consumer_batch_size=8"))
    run = read_config(cfg, choose_rules("2.0").rules)
    assert training_step(run, run.engines["actor"]) == "no train_dataset.batch_size"


@pytest.mark.parametrize(
    "overrides,fused",
    [
        ((), False),  # mbridge, AReaL's default, leaves Megatron-Core's default: off
        (("+actor.megatron.bridge_type=megatron-bridge",), True),
        (("+actor.megatron.bridge_type=megatron-bridge", "+actor.use_lora=true"), False),
    ],
)
def test_gradient_accumulation_fusion_follows_the_bridge(
    overrides: tuple[str, ...], fused: bool
) -> None:
    run = read_config(_areal2(overrides), choose_rules("2.0").rules)
    step = training_step(run, run.engines["actor"])
    assert isinstance(step, TrainingStep)
    assert step.knobs["gradient_accumulation_fusion"] is fused


def test_the_plan_has_an_s_per_step_column_that_matches_the_model() -> None:
    plan = validate(_areal2(("scheduler.type=local",)), settings=Settings(areal_version="2.0"))
    actor = plan.engines["actor"]
    assert actor.step_seconds is not None and plan.engines["rollout"].step_seconds is None
    run = read_config(_areal2(), choose_rules("2.0").rules)
    step = training_step(run, run.engines["actor"])
    assert isinstance(step, TrainingStep)
    shape = shape_of({"hf_config": "Qwen/Qwen2.5-1.5B-Instruct"})
    assert actor.allocation is not None
    assert actor.step_seconds == pytest.approx(
        step.predict(actor.allocation, shape, "h100", 8).batch_seconds
    )
    from areal_conf.plan.report import plan_table

    table = plan_table(plan)
    header = table.splitlines()[0].split()
    assert header[-1] == "s/step"
    assert "s/step: predicted on h100 (assumed" in table
    assert plan.to_dict()["engines"]["actor"]["step_seconds"] == round(actor.step_seconds, 3)
    faster = validate(
        _areal2(("scheduler.type=local",)), settings=Settings(areal_version="2.0", gpu="b200")
    )
    assert faster.engines["actor"].step_seconds < actor.step_seconds  # type: ignore[operator]


def test_no_column_without_a_shape_or_a_batch() -> None:
    from areal_conf.plan.report import plan_table

    cfg = _areal2(("scheduler.type=local", "~train_dataset", "rollout.consumer_batch_size=8"))
    plan = validate(cfg, settings=Settings(areal_version="2.0"))
    assert all(e.step_seconds is None for e in plan.engines.values())
    assert "s/step" not in plan_table(plan)


def test_the_mean_response_length_is_an_areal_conf_setting() -> None:
    assert from_environment({"AREAL_CONF_MEAN_RESPONSE_TOKENS": "900"}).mean_response_tokens == 900
    with pytest.raises(AllocationError, match="positive whole number of tokens"):
        from_environment({"AREAL_CONF_MEAN_RESPONSE_TOKENS": "-3"})


# -- suggest -----------------------------------------------------------------------------


def test_suggest_prints_layouts_per_engine_and_the_split(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(AREAL2)
    assert main(["suggest", "--config", MEGATRON_YAML, "scheduler.type=local"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("predicted on h100 (assumed")
    assert "actor (megatron:d4 on 4 GPUs" in out and "rollout (sglang:d4 on 4 GPUs)" in out
    # one table of the whole RL step (the split alone is printed only when the step is
    # not predicted): its fastest row splits the same 8 GPUs
    assert "whole RL step (asynchronous" in out and "rollout/actor split" not in out
    assert "mean response 512 tokens" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if "GPUs (rollout+actor)" in line)
    first = lines[header + 1].split()
    assert sum(int(n) for n in first[2].split("+")) == 8
    # The same through the whole AReaL command, with another mean response length.
    argv = ["suggest", "--mean-response-tokens", "1000", "--top", "2", "--", "python"]
    argv += ["examples/math/gsm8k_rl.py", "--config", MEGATRON_YAML, "scheduler.type=local"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "mean response 1,000 tokens" in out


def test_suggest_marks_what_a_step_leaves_out_and_keeps_awex(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1 AWEX shares the actor's GPUs by its own weight update: the layouts offered keep
    it (none switches to the disk), and the update no row prices is said, row by row."""
    monkeypatch.chdir(AREAL2)
    yaml = "examples/math/gsm8k_grpo_awex_colocate.yaml"
    assert main(["suggest", "--config", yaml, "scheduler.type=local"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("whole RL step") :]
    rows = [line for line in table.splitlines() if "rollout.backend=" in line]
    assert rows and all("weight_update_mode" not in row for row in rows)
    assert all(row.split()[6].endswith("*") for row in rows)  # step s, marked
    assert "* not counted: update_weights (weight_update_mode=awex is not priced)" in table


def test_suggest_of_a_layout_that_does_not_start_offers_layouts_that_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A layout error (here tp 3 against the model's 16 heads; on a machine with fewer
    GPUs than the config asks for, the same): the error, then the fastest layouts of the
    actor and the rollout that pass on the config's GPUs, each checked."""
    monkeypatch.chdir(AREAL2)
    argv = ["--config", MEGATRON_YAML, "scheduler.type=local", "actor.backend=megatron:d1t3"]
    assert main(["suggest", *argv]) == 0
    out = capsys.readouterr().out
    assert "this config does not start as it is (rule: model): actor: megatron:t3 breaks" in out
    assert "that pass on its 8 GPUs:" in out
    rows = [line.split() for line in out.splitlines() if "rollout.backend=" in line]
    assert rows
    for row in rows:
        overrides = [word for word in row if "=" in word]
        check_command(["python", "x.py", *argv, *overrides], cwd=AREAL2)
    assert main(["suggest", "--json", *argv]) == 0
    assert json.loads(capsys.readouterr().out)["refused"]["rule"] == "model"


def test_suggest_of_a_config_that_would_not_start_is_its_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(AREAL2)
    assert main(["suggest", "--config", MEGATRON_YAML, "scheduler.type=kubernetes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: scheduler.type") and "Traceback" not in err
    assert main(["suggest", "--config", "nope.yaml"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_plan_json_has_step_seconds_and_speed_note(tmp_path: Path) -> None:
    plan = validate(_areal2(("scheduler.type=local",)), settings=Settings(areal_version="2.0"))
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["speed_note"].startswith("s/step: predicted on h100")
    assert data["engines"]["rollout"]["step_seconds"] is None

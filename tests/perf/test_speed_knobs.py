"""What an AReaL config sets that changes a training step's speed reaches the predicted
step time (``areal_conf.perf.speed.training_step``), or the plan says it is not modelled.

AReaL 2.0 (cbff54d64), ``areal/api/cli_args.py``: ``megatron.ddp.overlap_grad_reduce``
and ``overlap_param_gather`` default off (787-788) and LoRA turns them off
(``areal/models/mcore/registry.py:503-506``); ``megatron.virtual_pipeline_parallel_size``
(915-923) interleaves the pipeline; ``megatron.fp8_config`` (1061, ``FP8EngineConfig``
798-897) runs the linear layers in FP8 on a Megatron engine
(``areal/engine/megatron_engine.py:350-351, 1673-1704``). The Archon FP8 mode
(536-545), ``fsdp.offload_params`` (489), Megatron's partial recomputation
(``recompute_num_layers``, ``recompute_modules``: 967-969) and the other keys
``areal_conf.config.backend_knobs.BACKEND_KEYS`` names change speed too and are not
priced: the plan says so.
"""

from __future__ import annotations

from typing import Any

import pytest
from _helpers import FIXTURES

from areal_conf.command.argv import parse_config_command
from areal_conf.command.check import compose_as_areal
from areal_conf.perf.speed import TrainingStep, training_step
from areal_conf.settings import Settings
from areal_conf.validation import read_run, validate_run

EXAMPLE = ["--config", "examples/math/gsm8k_grpo_megatron.yaml", "scheduler.type=slurm"]
#: Two nodes: the actor's data-parallel traffic crosses the network, where overlap counts.
TWO_NODES = ["cluster.n_nodes=2", "actor.backend=megatron:d8p2", "rollout.backend=sglang:d8"]


@pytest.fixture(scope="module")
def reading() -> Any:
    command = parse_config_command(EXAMPLE, cwd=FIXTURES / "areal2")
    cfg = compose_as_areal(command, areal_version="2.0")
    return read_run(cfg, settings=Settings(areal_version="2.0", gpu="h100"))


def actor_step(reading: Any, *edits: str) -> tuple[float, str, TrainingStep]:
    plan = validate_run(reading, [*TWO_NODES, *edits])
    assert plan.run is not None and plan.run.actor is not None
    step = training_step(plan.run, plan.run.actor)
    assert isinstance(step, TrainingStep)
    seconds = plan.engines["actor"].step_seconds
    assert seconds is not None
    return seconds, plan.speed_note, step


def test_areal_s_defaults_overlap_nothing(reading: Any) -> None:
    _, note, step = actor_step(reading)
    assert step.knobs["overlap_grad_reduce"] is False
    assert step.knobs["overlap_param_gather"] is False
    assert step.knobs["virtual_stages"] == 1
    assert "not modelled" not in note


def test_overlap_flags_hide_data_parallel_traffic(reading: Any) -> None:
    plain, _, _ = actor_step(reading)
    grads, _, step = actor_step(reading, "++actor.megatron.ddp.overlap_grad_reduce=true")
    both, _, _ = actor_step(
        reading,
        "++actor.megatron.ddp.overlap_grad_reduce=true",
        "++actor.megatron.ddp.overlap_param_gather=true",
    )
    assert step.knobs["overlap_grad_reduce"] is True
    assert both < grads < plain


def test_lora_turns_the_overlap_off(reading: Any) -> None:
    _, _, step = actor_step(
        reading,
        "++actor.megatron.ddp.overlap_grad_reduce=true",
        "actor.use_lora=true",
        "rollout.backend=vllm:d8",  # a megatron actor with LoRA updates vLLM only
    )
    assert step.knobs["overlap_grad_reduce"] is False


def test_virtual_stages_shrink_the_pipeline_bubble(reading: Any) -> None:
    plain, _, _ = actor_step(reading)
    virtual, _, step = actor_step(reading, "++actor.megatron.virtual_pipeline_parallel_size=2")
    assert step.knobs["virtual_stages"] == 2
    assert virtual < plain


@pytest.mark.parametrize(
    "backend, edit, key",
    [
        (
            "megatron:d8p2",
            "++actor.megatron.use_precision_aware_optimizer=true",
            "actor.megatron.use_precision_aware_optimizer",
        ),
        ("fsdp:d16", "++actor.fsdp.offload_params=true", "actor.fsdp.offload_params"),
        ("archon:d16", "++actor.archon.fp8_config.mode=blockwise", "actor.archon.fp8_config.mode"),
        (
            "megatron:d8p2",
            "++actor.megatron.recompute_num_layers=2",
            "actor.megatron.recompute_num_layers",
        ),
        (
            "megatron:d8p2",
            "++actor.megatron.enable_fp32_lm_head=true",
            "actor.megatron.enable_fp32_lm_head",
        ),
        ("archon:d16", "++actor.archon.enable_compile=true", "actor.archon.enable_compile"),
        ("archon:d8p2", "++actor.archon.pp_schedule=ZBVZeroBubble", "actor.archon.pp_schedule"),
        ("fsdp:d16", "++actor.fsdp.per_layer_optim_step=true", "actor.fsdp.per_layer_optim_step"),
    ],
)
def test_what_is_not_priced_is_said_with_the_step(
    reading: Any, backend: str, edit: str, key: str
) -> None:
    plain, _, _ = actor_step(reading, f"actor.backend={backend}")
    seconds, note, step = actor_step(reading, f"actor.backend={backend}", edit)
    assert step.unpriced == (key,)
    assert note.endswith(f"; not modelled: {key}")
    assert seconds == plain


def test_what_archon_recomputes_is_priced(reading: Any) -> None:
    """With gradient_checkpointing Archon recomputes at op level by default (attention
    and every second matmul saved), whole layers with ``ac_mode: full``, nothing with
    ``none`` (``areal/experimental/engine/archon_utils.py:111-143``)."""
    on = ["actor.backend=archon:d8p2", "++actor.gradient_checkpointing=true"]
    op, note, step = actor_step(reading, *on)
    full, _, _ = actor_step(reading, *on, "++actor.archon.ac_mode=full")
    none, _, _ = actor_step(reading, *on, "++actor.archon.ac_mode=none")
    plain, _, _ = actor_step(reading, "actor.backend=archon:d8p2")
    assert step.recompute("archon") == "op" and "not modelled" not in note
    assert none == plain < op < full


def test_archon_s_interleaved_schedule_shrinks_the_bubble(reading: Any) -> None:
    """Archon's default schedule, Interleaved1F1B, runs two stages a rank
    (``areal/experimental/models/archon/pipeline_parallel.py:449-450``)."""
    interleaved, _, step = actor_step(reading, "actor.backend=archon:d8p2")
    plain, _, _ = actor_step(
        reading, "actor.backend=archon:d8p2", "++actor.archon.pp_schedule=1F1B"
    )
    assert step.knobs["virtual_stages"] == 2
    assert interleaved < plain


def test_megatron_reduces_gradients_in_the_dtype_its_ddp_says(reading: Any) -> None:
    """Megatron reads ``megatron.ddp.grad_reduce_in_fp32``; the engine's
    ``grad_reduce_dtype`` is FSDP's (``areal/engine/fsdp_utils/parallel.py:386``)."""
    fp32, _, _ = actor_step(reading)
    engine_key, _, _ = actor_step(reading, "++actor.grad_reduce_dtype=bfloat16")
    bf16, _, step = actor_step(reading, "++actor.megatron.ddp.grad_reduce_in_fp32=false")
    assert step.knobs["grad_reduce_dtype"] == "bfloat16"
    assert engine_key == fp32 and bf16 < fp32


def test_the_flex_dispatcher_reaches_the_step(reading: Any) -> None:
    """``megatron.moe_token_dispatcher_type: flex`` (DeepEP) is priced, not named."""
    _, note, step = actor_step(reading, "++actor.megatron.moe_token_dispatcher_type=flex")
    assert step.knobs["dedup_dispatch"] is True and "not modelled" not in note
    _, _, plain = actor_step(reading)
    assert plain.knobs["dedup_dispatch"] is False


def test_only_the_keys_of_the_engine_s_own_backend_count(reading: Any) -> None:
    """AReaL reads ``fsdp.*`` for an FSDP engine only: a Megatron actor's is not said."""
    _, note, step = actor_step(reading, "++actor.fsdp.offload_params=true")
    assert step.unpriced == ()
    assert "not modelled" not in note


#: A model released in FP8, as AReaL's Megatron engine needs for FP8 training.
FP8_MODEL = "actor.path=Qwen/Qwen3-1.7B-FP8"


def test_fp8_training_is_priced_on_a_megatron_engine(reading: Any) -> None:
    """``megatron.fp8_config`` (AReaL's default recipe ``delayed``) runs the linear
    layers' GEMMs in FP8: faster than bf16; current scaling (``tensorwise``) reads each
    tensor once more than delayed scaling. ``param`` with ``ddp.fp8_param_gather``
    gathers the weights in FP8 (across nodes: cheaper); a recipe Transformer Engine does
    not run is named and priced as bf16."""
    plain, _, _ = actor_step(reading, FP8_MODEL)
    delayed, note, step = actor_step(reading, FP8_MODEL, "++actor.megatron.fp8_config.mode=e4m3")
    tensorwise, _, _ = actor_step(
        reading, FP8_MODEL, "++actor.megatron.fp8_config.recipe=tensorwise"
    )
    assert step.megatron_knobs["fp8"] == "delayed" and "not modelled" not in note
    assert delayed < tensorwise < plain
    gathered, note, step = actor_step(
        reading,
        FP8_MODEL,
        "++actor.megatron.fp8_config.param=true",
        "++actor.megatron.ddp.fp8_param_gather=true",
    )
    assert step.megatron_knobs["fp8_param_gather"] is True and "not modelled" not in note
    assert gathered < delayed
    custom, note, _ = actor_step(reading, FP8_MODEL, "++actor.megatron.fp8_config.recipe=custom")
    assert custom == plain and note.endswith("; not modelled: actor.megatron.fp8_config.recipe")


def test_only_megatron_reads_fp8_config(reading: Any) -> None:
    """AReaL reads ``megatron.*`` on a Megatron engine only: an FSDP actor with a
    ``megatron.fp8_config`` trains in bf16."""
    plain, _, _ = actor_step(reading, "actor.backend=fsdp:d16")
    fsdp, _, step = actor_step(
        reading, "actor.backend=fsdp:d16", "++actor.megatron.fp8_config.mode=e4m3"
    )
    assert fsdp == plain and not step.megatron_knobs

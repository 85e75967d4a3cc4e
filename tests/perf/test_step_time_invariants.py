"""What the step-time model must hold for every layout, whatever its constants: over
every layout ``layouts`` enumerates for models of AReaL's examples (dense and MoE) on 8,
16 and 64 GPUs, and MoE layouts with expert tensor parallelism,

- every term is a time (finite, not negative) and the total is the sum of the terms;
- the model FLOPs of a step never run faster than the GPUs' achievable rate (MFU at most
  the share of the peak a large GEMM reaches), nor do they in the compute term alone
  (however the experts are split: by ``ep`` or by expert tensor parallelism), in bf16 or,
  against the FP8 peak, in FP8;
- twice the data-parallel ranks for the same tokens are never slower by more than the
  data-parallel traffic they add.

A model tuned to its test tables can break these where no table looks; they hold on
every row instead."""

from __future__ import annotations

import math
import re
from functools import cache

import pytest

from areal_conf.model.hardware import HARDWARE
from areal_conf.model.known_models import known_model
from areal_conf.perf.step_time import StepTime, step_time
from areal_conf.spec.allocation import ModelAllocation
from areal_conf.spec.layouts import layouts

#: Models of AReaL's examples (small and mid-sized dense, a mixture of many small experts)
#: and one of a few large experts, whose expert GEMMs are most of its work.
MODELS = (
    "Qwen/Qwen2.5-1.5B",
    "Qwen/Qwen3-8B",
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-30B-A3B",
    "mistralai/Mixtral-8x7B-v0.1",
)
BACKENDS = ("megatron", "fsdp", "archon")
GPUS = (8, 16, 64)
#: Layouts of the MoE model whose experts are split by tensor parallelism as well.
EXPERT_TP = (
    "megatron:(attn:d4t4|ffn:t4e4)",
    "megatron:(attn:d4t4|ffn:d4e4)",
    "megatron:(attn:d4t4|ffn:t2e8)",
    "megatron:(attn:d16|ffn:t4e4)",
    "megatron:(attn:d8t8|ffn:t8e8)",
    "megatron:(attn:d2t8|ffn:d2e8)",
)
TOKENS = {"tokens_per_step": 1 << 20, "tokens_per_microbatch": 8192}


@cache
def shape(model_id: str) -> dict[str, int | bool]:
    sizes = known_model(model_id)
    assert sizes is not None, model_id
    return sizes


def cases() -> list[tuple[str, str, str]]:
    found = []
    for model_id in MODELS:
        for backend in BACKENDS:
            for gpus in GPUS:
                specs = layouts(backend, gpus, max_tp=8, model=shape(model_id))
                found += [(model_id, spec, "h100") for spec in specs]
    found += [
        (model_id, spec, gpu)
        for model_id in ("Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-v0.1")
        for spec in EXPERT_TP
        for gpu in ("h100", "a100")
    ]
    return found


CASES = cases()


def predicted(model_id: str, spec: str, gpu: str, **knobs: object) -> StepTime:
    return step_time(spec, shape(model_id), gpu=gpu, **{**TOKENS, **knobs})  # type: ignore[arg-type]


def test_the_cases_cover_dense_moe_and_expert_tensor_parallelism() -> None:
    assert len(CASES) > 500
    assert any("e" in spec.partition(":")[2] for _, spec, _ in CASES)


@pytest.mark.parametrize(
    "recompute, fp8", [("none", None), ("op", None), ("full", None), ("full", "tensorwise")]
)
def test_every_term_is_a_time_and_the_total_their_sum(recompute: str, fp8: str | None) -> None:
    for model_id, spec, gpu in CASES:
        if fp8 and not HARDWARE[gpu].fp8_peak_tflops:
            continue
        st = predicted(model_id, spec, gpu, recompute=recompute, fp8=fp8)
        terms = [getattr(st, name) for name in StepTime.TERMS]
        assert all(math.isfinite(t) and t >= 0 for t in terms), (spec, st)
        assert math.isclose(sum(terms), st.total, rel_tol=1e-9), (spec, st)


@pytest.mark.parametrize("fp8", [None, "delayed"])
def test_no_layout_runs_faster_than_the_gpus_achievable_rate(fp8: str | None) -> None:
    for model_id, spec, gpu in CASES:
        if fp8 and not HARDWARE[gpu].fp8_peak_tflops:
            continue
        st = predicted(model_id, spec, gpu, fp8=fp8)
        achievable = HARDWARE[gpu].gemm_efficiency
        peak = HARDWARE[gpu].fp8_peak_tflops if fp8 else HARDWARE[gpu].peak_tflops
        assert 0 < st.mfu * HARDWARE[gpu].peak_tflops / peak <= achievable, (model_id, spec)
        world = ModelAllocation.from_str(spec).parallel.world_size
        rate = st.model_flops / (st.compute * world * peak * 1e12)
        assert rate <= achievable, (model_id, spec, rate)


def test_twice_the_data_parallel_ranks_add_no_more_than_their_traffic() -> None:
    checked = 0
    for model_id, spec, gpu in CASES:
        if ModelAllocation.from_str(spec).parallel.world_size > 32 or "(" in spec:
            continue
        doubled = twice_the_data_parallel(spec)
        one, two = predicted(model_id, spec, gpu), predicted(model_id, doubled, gpu)
        added = max(0.0, two.dp_comm - one.dp_comm)
        assert two.total <= one.total + added + 1e-9, (model_id, spec, doubled, one, two)
        checked += 1
    assert checked > 100


def twice_the_data_parallel(spec: str) -> str:
    """``spec`` with twice its data-parallel ranks (a flat layout: ``fsdp:d4t2`` →
    ``fsdp:d8t2``, ``megatron:t8`` → ``megatron:d2t8``)."""
    backend, body = spec.split(":", 1)
    written = re.match(r"d(\d+)", body)
    if written is None:
        return f"{backend}:d2{body}"
    return f"{backend}:d{2 * int(written[1])}{body[written.end() :]}"

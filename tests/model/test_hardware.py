"""The GPUs areal-conf knows by name, and how a name reaches the memory check."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from areal_conf import AllocationError
from areal_conf.cli.options import settings_from
from areal_conf.model.hardware import FP8_RECIPES, HARDWARE, Hardware, fp8_refused, hardware
from areal_conf.settings import from_environment


def test_the_table_has_the_common_training_gpus() -> None:
    assert {"a100", "h100", "h200", "b200"} <= set(HARDWARE)
    for gpu in HARDWARE.values():
        numbers = [getattr(gpu, f.name) for f in dataclasses.fields(gpu) if f.name != "name"]
        assert all(isinstance(n, (int, float)) and n >= 0 for n in numbers), gpu
        assert all(getattr(gpu, f) > 0 for f in ("peak_tflops", "hbm_gb", "sm_count")), gpu
        assert isinstance(gpu.sm_count, int) and 0 < gpu.gemm_efficiency < 1
    # the ordering every data sheet agrees on
    assert HARDWARE["h200"].hbm_gb > HARDWARE["h100"].hbm_gb == HARDWARE["a100"].hbm_gb
    assert (
        HARDWARE["b200"].peak_tflops > HARDWARE["h100"].peak_tflops > HARDWARE["a100"].peak_tflops
    )
    assert all(g.intra_node_gb_per_s > g.inter_node_gb_per_s for g in HARDWARE.values())


def test_the_h800_is_an_h100_with_less_than_half_its_nvlink() -> None:
    """H800: H100's die and compute, NVLink 400 GB/s both ways (200 one way); its
    sustained rate, as every GPU's, is the data sheet's peak times what a large GEMM
    reaches."""
    h800, h100 = HARDWARE["h800"], HARDWARE["h100"]
    assert dataclasses.replace(h800, name=h100.name, intra_node_gb_per_s=450.0) == h100
    assert h800.intra_node_gb_per_s == 200.0
    for gpu in HARDWARE.values():
        assert gpu.sustained_tflops == gpu.peak_tflops * gpu.gemm_efficiency < gpu.peak_tflops
    # a layout whose tensor-parallel traffic crosses NVLink every layer is slower there
    from areal_conf.perf.step_time import step_time

    model = {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32}
    model |= {"ffn_hidden_size": 14336, "vocab_size": 128256, "num_kv_heads": 8}
    knobs = {"tokens_per_step": 1 << 20, "tokens_per_microbatch": 8192}
    on = {gpu: step_time("megatron:t8", model, gpu=gpu, **knobs) for gpu in ("h100", "h800")}
    assert on["h800"].tp_comm > 2 * on["h100"].tp_comm
    assert on["h800"].compute == on["h100"].compute


def test_fp8_is_twice_bf16_on_the_gpus_that_have_it() -> None:
    """The data sheets' dense FP8 rate is twice the bf16 one on Hopper and Blackwell;
    A100 has no FP8 tensor cores (0), so step_time refuses FP8 on it."""
    for name, gpu in HARDWARE.items():
        expected = 0.0 if name == "a100" else 2 * gpu.peak_tflops
        assert gpu.fp8_peak_tflops == pytest.approx(expected, rel=0.001), name
        assert gpu.fp8_sustained_tflops == gpu.fp8_peak_tflops * gpu.gemm_efficiency


@pytest.mark.parametrize(
    "gpu, runs",
    [
        ("a100", ()),  # capability 8.0, no FP8 tensor cores
        ("h100", ("delayed", "tensorwise", "blockwise")),  # 9.0
        ("h20", ("delayed", "tensorwise", "blockwise")),
        ("b200", ("delayed", "tensorwise", "blockwise", "mxfp8")),  # 10.0
    ],
)
def test_each_gpu_runs_the_fp8_recipes_transformer_engine_allows_it(
    gpu: str, runs: tuple[str, ...]
) -> None:
    """Transformer Engine's ``check_recipe_support``: delayed and current scaling from
    compute capability 8.9, blockwise from 9.0, MXFP8 from 10.0 to below 12.0
    (``transformer_engine/pytorch/quantization.py`` L146-238)."""
    for recipe in FP8_RECIPES:
        assert (fp8_refused(HARDWARE[gpu], recipe) == "") is (recipe in runs), (gpu, recipe)
    unknown = dataclasses.replace(HARDWARE["h100"], compute_capability=None)
    assert all(fp8_refused(unknown, recipe) == "" for recipe in FP8_RECIPES)


def test_an_entry_is_frozen_and_changed_with_replace() -> None:
    h100 = HARDWARE["h100"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        h100.hbm_gb = 1.0  # type: ignore[misc]
    slower = dataclasses.replace(h100, inter_node_gb_per_s=25.0)
    assert slower.inter_node_gb_per_s == 25.0 and HARDWARE["h100"].inter_node_gb_per_s == 50.0
    assert hardware(slower) is slower


def test_a_name_is_found_in_any_case_and_an_unknown_one_is_refused() -> None:
    assert hardware("H200") is HARDWARE["h200"]
    with pytest.raises(AllocationError) as caught:
        hardware("v100", "--gpu")
    assert str(caught.value).startswith("--gpu: 'v100' is not a GPU areal-conf knows")
    assert "--gpu-memory-gb" in caught.value.hint


@pytest.mark.parametrize(
    ("environ", "args", "memory", "source"),
    [
        ({"AREAL_CONF_GPU": "h200"}, {}, 141.0, "AREAL_CONF_GPU=h200"),
        (
            {"AREAL_CONF_GPU": "h200", "AREAL_CONF_GPU_MEMORY_GB": "100"},
            {},
            100.0,
            "AREAL_CONF_GPU_MEMORY_GB",
        ),
        ({"AREAL_CONF_GPU_MEMORY_GB": "100"}, {"gpu": "b200"}, 180.0, "--gpu b200"),
        (
            {"AREAL_CONF_GPU": "b200"},
            {"gpu": "h200", "gpu_memory_gb": 120.0},
            120.0,
            "--gpu-memory-gb",
        ),
        ({}, {}, None, ""),
    ],
)
def test_the_gpus_memory_comes_from_its_name_unless_given(
    environ: dict[str, str],
    args: dict[str, object],
    memory: float | None,
    source: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("AREAL_CONF_GPU", "AREAL_CONF_GPU_MEMORY_GB"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    settings = settings_from(argparse.Namespace(**args))
    assert (settings.gpu_memory_gb, settings.gpu_memory_from) == (memory, source)
    assert from_environment(environ).gpu == environ.get("AREAL_CONF_GPU")


def test_an_unknown_gpu_in_the_environment_is_an_error() -> None:
    with pytest.raises(AllocationError, match="AREAL_CONF_GPU: 'x1' is not a GPU"):
        from_environment({"AREAL_CONF_GPU": "x1"})


def test_hardware_is_a_dataclass_of_numbers() -> None:
    assert [f.name for f in dataclasses.fields(Hardware)] == [
        "name",
        "peak_tflops",
        "hbm_gb",
        "hbm_tb_per_s",
        "intra_node_gb_per_s",
        "inter_node_gb_per_s",
        "sm_count",
        "gemm_efficiency",
        "host_gb_per_s",
        "fp8_peak_tflops",
        "compute_capability",
    ]

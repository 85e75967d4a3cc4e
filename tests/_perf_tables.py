"""The published step times of ``tests/fixtures/perf``, as rows the step-time model can
predict: each with its layout, model, batch and the measured seconds of one step.

The papers report throughput (TFLOPS per GPU, counted with their own FLOP formulas);
a row's measured step time is those FLOPs over the GPUs' throughput. Shared by the
tests (tests/perf/test_performance.py) and ``benchmarks/steptime.py``.

Setup the tables do not print, as the sources describe it:

- Narayanan et al. 2021: GPT with a 4h GELU MLP (modelled as a gated MLP of the same
  weights, 8h/3), sequence 2048, vocabulary 51,200, fp16 with full activation
  recomputation, micro-batch 1 for the PTD-P rows (Table 2 gives it), no
  overlap of the data-parallel all-reduce, gradients all-reduced in fp16 and accumulated
  by a separate add each micro-batch (Megatron had no gradient accumulation fusion yet).
- Korthikanti et al. 2022: the same GPT, one data-parallel replica, full recomputation
  without sequence parallelism against selective recomputation with it; Megatron-LM's
  training script, so gradient accumulation fused into the weight-gradient GEMMs.
- Megatron-LM's 2024 H100 table: GPT with sequence 4096 and vocabulary 131,072, bf16,
  distributed optimizer, data-parallel and tensor-parallel communication overlapped,
  selective recomputation, micro-batch 1, gradient accumulation fused.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from areal_conf.model.hardware import Hardware
from areal_conf.model.shape import ModelShape
from areal_conf.perf.parameters import parameter_count

SHARED = Path(__file__).resolve().parent / "fixtures" / "perf"
#: A dense model of 32B parameters (Qwen3-32B's sizes), given as a mapping: the model of
#: the step-time benchmark's speed measurement and of the shape tests.
DENSE_32B: dict[str, Any] = {
    "num_layers": 48,
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "num_kv_heads": 8,
    "ffn_hidden_size": 25600,
    "vocab_size": 151936,
}
#: Qwen3-30B-A3B's sizes (its config.json): an MoE model of 128 experts, 8 a token.
QWEN3_30B_A3B: dict[str, Any] = {
    "num_layers": 48,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_kv_heads": 4,
    "head_dim": 128,
    "ffn_hidden_size": 6144,
    "vocab_size": 151936,
    "num_experts": 128,
    "moe_ffn_hidden_size": 768,
    "moe_router_topk": 8,
}


@dataclass(frozen=True)
class Row:
    table: str
    workload: str  # rows of one workload are layouts of the same job
    label: str
    spec: str
    model: dict[str, Any]
    gpu: str | Hardware  # a name of HARDWARE, or a GPU with the source's network
    measured_s: float
    flops: float  # the source's FLOPs of one step, for throughput per GPU
    knobs: dict[str, Any] = field(default_factory=dict)


def gpt(heads: int, hidden: int, layers: int, vocab: int, seq: int) -> dict[str, Any]:
    """A GPT of the papers: MHA, a 4h MLP (as the gated MLP of equal weights)."""
    return {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "ffn_hidden_size": round(8 * hidden / 3),
        "vocab_size": vocab,
        "max_seq_len": seq,
    }


def narayanan_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. (2021), eq. 3: FLOPs of an iteration with full recomputation."""
    return (
        96
        * batch
        * seq
        * layers
        * hidden**2
        * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    )


def megatron_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Megatron-LM's num_floating_point_operations for a GPT (no recomputation counted)."""
    return (
        72
        * batch
        * seq
        * layers
        * hidden**2
        * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
    )


def _read(name: str) -> list[dict[str, str]]:
    with open(SHARED / name, newline="") as f:
        return list(csv.DictReader(f))


def _megatron_spec(d: int, t: int, p: int) -> str:
    body = "".join(f"{k}{v}" for k, v in (("d", d), ("p", p), ("t", t)) if v > 1) or "d1"
    return "megatron:" + body


SEQ_2021 = 2048
VOCAB_2021 = 51200
KNOBS_2021: dict[str, Any] = {
    "recompute": "full",
    "overlap_grad_reduce": False,
    "grad_reduce_dtype": "float16",
    "flash_attention": False,
    "distributed_optimizer": False,
}


def _weak_scaling(
    table: str, gpu: str, flops_of: Callable[..., float], knobs: dict[str, Any]
) -> list[Row]:
    """A weak-scaling table: one GPT a row, on its own layout, each a workload of its own
    kind (rows compare by throughput per GPU, not by step time)."""
    rows = []
    for r in _read(table + ".csv"):
        h, layers, heads = int(r["hidden"]), int(r["layers"]), int(r["heads"])
        t, p, d = int(r["t"]), int(r["p"]), int(r["d"])
        batch, gpus = int(r["global_batch"]), int(r["gpus"])
        seq, vocab = int(r.get("seq", SEQ_2021)), int(r.get("vocab", VOCAB_2021))
        flops = flops_of(batch, seq, layers, h, vocab)
        rows.append(
            Row(
                table,
                table,
                f"{r['params_billion']}B",
                _megatron_spec(d, t, p),
                gpt(heads, h, layers, vocab, seq),
                gpu,
                flops / (gpus * float(r["tflops_per_gpu"]) * 1e12),
                flops,
                {"tokens_per_step": batch * seq, "tokens_per_microbatch": seq, **knobs},
            )
        )
    return rows


def narayanan_table1() -> list[Row]:
    knobs = {**KNOBS_2021, "sequence_parallel": False}
    return _weak_scaling("narayanan2021_table1", "a100", narayanan_flops, knobs)


# GPT-3 175B of Table 2 (96 layers, hidden 12288, 96 heads).
GPT3 = (96, 12288, 96)


def narayanan_table2() -> list[Row]:
    rows = []
    heads, h, layers = GPT3
    for r in _read("narayanan2021_table2.csv"):
        t, p, gpus = int(r["t"]), int(r["p"]), int(r["gpus"])
        batch, mb = int(r["global_batch"]), int(r["microbatch"])
        d = gpus // (t * p)
        spec = "fsdp:d" + str(gpus) if r["scheme"] == "zero3" else _megatron_spec(d, t, p)
        flops = narayanan_flops(batch, SEQ_2021, layers, h, VOCAB_2021)
        rows.append(
            Row(
                "narayanan2021_table2",
                f"narayanan2021_table2 {gpus} GPUs",
                f"{r['scheme']} {gpus}",
                spec,
                gpt(heads, h, layers, VOCAB_2021, SEQ_2021),
                "a100",
                flops / (gpus * float(r["tflops_per_gpu"]) * 1e12),
                flops,
                {
                    **KNOBS_2021,
                    "tokens_per_step": batch * SEQ_2021,
                    "tokens_per_microbatch": mb * SEQ_2021,
                    "seq_len": SEQ_2021,
                    "sequence_parallel": False,
                    "zero3": "deepspeed-0.3",  # as Narayanan et al. ran it
                },
            )
        )
    return rows


def korthikanti_table5() -> list[Row]:
    rows = []
    for r in _read("korthikanti2022_table5.csv"):
        h, layers, heads = int(r["hidden"]), int(r["layers"]), int(r["heads"])
        t, p, v = int(r["t"]), int(r["p"]), int(r["virtual_stages"])
        batch, mb, seq = int(r["global_batch"]), int(r["microbatch"]), int(r["seq"])
        spec = _megatron_spec(1, t, p)
        common = {
            "tokens_per_step": batch * seq,
            "tokens_per_microbatch": mb * seq,
            "seq_len": seq,
            "virtual_stages": v,
            "flash_attention": False,
            "distributed_optimizer": False,
            "gradient_accumulation_fusion": True,
        }
        for column, knobs in (
            ("iter_s_full_recompute", {"recompute": "full", "sequence_parallel": False}),
            ("iter_s_selective_sp", {"recompute": "selective", "sequence_parallel": True}),
        ):
            rows.append(
                Row(
                    "korthikanti2022_table5",
                    f"korthikanti2022_table5 {r['model']}",
                    f"{r['model']} {column.removeprefix('iter_s_')}",
                    spec,
                    gpt(heads, h, layers, VOCAB_2021, seq),
                    "a100",
                    float(r[column]),
                    narayanan_flops(batch, seq, layers, h, VOCAB_2021),
                    {**common, **knobs},
                )
            )
    return rows


def megatron_h100() -> list[Row]:
    knobs = {
        "recompute": "selective",
        "tp_comm_overlap": True,
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
        "gradient_accumulation_fusion": True,
    }
    return _weak_scaling("megatron_readme_h100_2024", "h100", megatron_flops, knobs)


def all_rows() -> list[Row]:
    return [*narayanan_table1(), *narayanan_table2(), *korthikanti_table5(), *megatron_h100()]


def predict(row: Row) -> Any:
    from areal_conf.perf.step_time import step_time

    return step_time(row.spec, row.model, gpu=row.gpu, **row.knobs)


def measured_per_gpu(row: Row, seconds: float) -> float:
    """TFLOPS per GPU at a step time, with the source's FLOP count."""
    from areal_conf.spec.allocation import ModelAllocation

    return row.flops / (ModelAllocation.from_str(row.spec).world_size * seconds) / 1e12


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (ties get their mean rank)."""

    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=False))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else 0.0


# -- the ordinal facts of Narayanan et al.'s figures 13-16 (64 A100 GPUs) ----------------
# Their models: 162.2B = 32 layers of hidden 20480 (128 heads); 5.9B = 32 layers of 3840
# (32 heads); 91B = 72 layers of 10240 (80 heads), the shapes that give those sizes with
# layer counts the pipelines divide.
M162 = gpt(128, 20480, 32, VOCAB_2021, SEQ_2021)
M59 = gpt(32, 3840, 32, VOCAB_2021, SEQ_2021)
M91 = gpt(80, 10240, 72, VOCAB_2021, SEQ_2021)
FIGURE_KNOBS: dict[str, Any] = {
    **KNOBS_2021,
    "tokens_per_microbatch": SEQ_2021,
    "sequence_parallel": False,
}


def figure_time(spec: str, model: dict[str, Any], batch: int, microbatch: int = 1) -> float:
    from areal_conf.perf.step_time import step_time

    knobs = {**FIGURE_KNOBS, "tokens_per_microbatch": microbatch * SEQ_2021, "seq_len": SEQ_2021}
    return step_time(spec, model, gpu="a100", tokens_per_step=batch * SEQ_2021, **knobs).total


def _lead(faster: float, slower: float) -> float:
    """How much slower ``slower`` is than ``faster`` (negative: it is faster)."""
    return slower / faster - 1


def figure_facts() -> list[tuple[str, float]]:
    """Each fact at the batch sizes its figure plots (figure 13 at 32 and 128, figures 14
    and 15 at 32, 128 and 512, figure 16 at 128 and 512), with the model's margin: the
    smallest relative step-time gap by which it holds (negative: by which it misses)."""
    facts = []
    for batch in (32, 128):
        times = {
            (t, p): figure_time(f"megatron:p{p}t{t}", M162, batch)
            for t, p in ((2, 32), (4, 16), (8, 8), (16, 4), (32, 2))
        }
        others = [v for k, v in times.items() if k != (8, 8)]
        facts.append(
            (
                f"fig. 13, batch {batch}: (t, p) = (8, 8) fastest",
                _lead(times[(8, 8)], min(others)),
            )
        )
        # The figure's axis is (pipeline, tensor): the slowest point is (32, 2) at batch
        # 32 (91 TFLOP/s a GPU, against 103 for (2, 32)) and (2, 32) at batch 128 (107).
        slowest = (2, 32) if batch == 32 else (32, 2)
        others = [v for k, v in times.items() if k != slowest]
        t, p = slowest
        facts.append(
            (
                f"fig. 13, batch {batch}: (p, t) = ({p}, {t}) slowest",
                _lead(max(others), times[slowest]),
            )
        )
    for batch in (32, 128, 512):
        for figure, dim, what in (
            (14, "p", "more pipeline stages (fewer data-parallel) are slower"),
            (15, "t", "more tensor parallelism (fewer data-parallel) is slower"),
        ):
            series = [
                figure_time(f"megatron:d{64 // n}{dim}{n}", M59, batch) for n in (2, 4, 8, 16, 32)
            ]
            gaps = [_lead(a, b) for a, b in itertools.pairwise(series)]
            facts.append((f"fig. {figure}, batch {batch}: {what}", min(gaps)))
    for batch in (128, 512):
        by_mb = {b: figure_time("megatron:p8t8", M91, batch, b) for b in (1, 2, 4)}
        facts.append(
            (
                f"fig. 16, batch {batch}: micro-batch 2 beats 1 and 4",
                _lead(by_mb[2], min(by_mb[1], by_mb[4])),
            )
        )
    return facts


def active_parameters(shape: ModelShape) -> float:
    """The parameters a token runs: all but the routed experts it is not sent to (a token
    runs ``moe_router_topk`` of them)."""
    idle = (shape.num_experts or 0) - (shape.moe_router_topk or 0)
    expert = 3 * shape.hidden_size * (shape.moe_ffn_hidden_size or 0)
    return float(parameter_count(shape) - shape.num_layers * expert * idle)

"""The step-time model against published measurements, and its speed.

For each table of ``shared/fixtures/perf`` it prints every row's predicted and measured
step time, then per workload (the rows one job could choose between) the Spearman rank
correlation of predicted against measured throughput per GPU and the top-1 regret: the
measured time of the layout the model ranks first over the measured best. Then the
ordinal facts of the Megatron paper's figures with the model's margin on each, and the
cost of one ``step_time`` call and of ranking every layout of a 1024-GPU engine.

Beside the model, on the same rows, a textbook baseline (:func:`textbook_seconds`): 6·N
FLOPs a token (8·N with full recomputation) at the GPU's sustained rate, plus the bytes of
ring collectives over each group's slowest link; per table the median and worst relative
error of both, per workload both Spearman correlations and top-1 regrets. Every table
here is a calibration source (the model's tests hold it); the model earns its complexity
only where it beats the baseline on rows it was not set on: the held-out sources of
``benchmarks/heldout`` (Megatron-Bridge, torchtitan, and four layout sweeps), each
reported on its own beside the baseline.

    python benchmarks/steptime.py
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _perf_tables import (
    DENSE_32B,
    Row,
    active_parameters,
    all_rows,
    figure_facts,
    measured_per_gpu,
    predict,
    spearman,
)

from areal_conf.model.hardware import HARDWARE, Hardware
from areal_conf.model.known_models import known_model
from areal_conf.model.shape import shape_of
from areal_conf.perf.parameters import parameter_count
from areal_conf.perf.ranking import rank_layouts
from areal_conf.perf.step_time import step_time
from areal_conf.spec.allocation import ModelAllocation

#: Bytes of a bf16/fp16 value, as every table trains.
HALF = 2


def textbook_seconds(row: Any) -> float:
    """The textbook step time of ``row``: compute is 6·N FLOPs a token (8·N with full
    recomputation, one more forward) at the GPU's sustained rate (``Hardware.sustained_tflops``,
    its FP8 one for a row trained in FP8), with N all of the model's parameters; communication
    is the bytes of ring collectives over the slowest link of each group, NVLink within a node
    and the GPU's network port across nodes: the gradient all-reduce of the data-parallel group
    (ZeRO-3: 1.5 times that, two all-gathers and a reduce-scatter) and, per layer and
    micro-batch, four all-reduces of the activations (two forward, two backward) in the
    tensor-parallel group. No overlap, no pipeline bubble, no kernel or GEMM shape effects: what
    the model adds is measured against this."""
    alloc = ModelAllocation.from_str(row.spec)
    par = alloc.parallel
    shape = shape_of(row.model)
    gpu = row.gpu if isinstance(row.gpu, Hardware) else HARDWARE[row.gpu]
    per_node = 8
    tokens = row.knobs["tokens_per_step"]
    microbatch = row.knobs["tokens_per_microbatch"]
    n = parameter_count(shape)
    active = active_parameters(shape)
    flops = (8 if row.knobs.get("recompute") == "full" else 6) * active * tokens
    rate = gpu.fp8_sustained_tflops if row.knobs.get("fp8") else gpu.sustained_tflops
    compute = flops / (par.world_size * rate * 1e12)

    def ring(members: int, nbytes: float, spans_nodes: bool) -> float:
        link = gpu.inter_node_gb_per_s if spans_nodes else gpu.intra_node_gb_per_s
        return (members - 1) / members * nbytes / (link * 1e9) if members > 1 else 0.0

    tp, dp, pp = par.tp_size, par.dp_size, par.pp_size
    grads = HALF * n / (tp * pp)
    dp_spans = tp * dp > per_node  # Megatron places tp fastest, then dp
    collectives = 3 if alloc.backend in ("fsdp", "archon") else 2  # ZeRO-3 against DDP
    data_parallel = collectives * ring(dp, grads, dp_spans)
    microbatches = max(1, tokens // (dp * microbatch))
    activation = HALF * microbatch * shape.hidden_size
    layers = shape.num_layers / pp
    tensor_parallel = microbatches * layers * 4 * 2 * ring(tp, activation, tp > per_node)
    return float(compute + data_parallel + tensor_parallel)


def tables() -> None:
    rows = all_rows()
    predicted = {id(row): predict(row).total for row in rows}
    header = f"{'measured s':>10} {'predicted s':>11} {'ratio':>6}"
    print(f"{'table':27} {'row':26} {'layout':20} {header}")
    for row in rows:
        p = predicted[id(row)]
        print(
            f"{row.table:27} {row.label:26} {row.spec.split(':')[1]:20} "
            f"{row.measured_s:10.2f} {p:11.2f} {p / row.measured_s:6.2f}"
        )
    print()
    print("Workloads (the layouts one job could choose between), by step time:")
    print(f"{'workload':42} {'rows':>4} {'Spearman':>9} {'top-1 regret':>13}")
    workloads: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        if row.table in ("narayanan2021_table2", "korthikanti2022_table5"):
            workloads[row.workload].append((row.measured_s, predicted[id(row)]))
    rhos = []
    for name, points in workloads.items():
        rho = spearman([m for m, _ in points], [p for _, p in points])
        chosen = min(points, key=lambda point: point[1])
        regret = chosen[0] / min(m for m, _ in points)
        rhos.append(rho)
        print(f"{name:42} {len(points):4} {rho:9.3f} {regret:13.3f}")
    print(f"{'mean':42} {'':4} {statistics.mean(rhos):9.3f}")
    print()
    print("Weak scaling (a different model each row), by TFLOPS per GPU:")
    for table in ("narayanan2021_table1", "megatron_readme_h100_2024"):
        chosen_rows = [r for r in rows if r.table == table]
        rho = spearman(
            [measured_per_gpu(r, r.measured_s) for r in chosen_rows],
            [measured_per_gpu(r, predicted[id(r)]) for r in chosen_rows],
        )
        print(f"{table:42} {len(chosen_rows):4} {rho:9.3f}")
    print()
    print("Figure facts, with the margin by which the predicted step times keep the order:")
    for fact, margin in figure_facts():
        print(f"{'holds' if margin > 0 else 'misses':7} {margin:+7.1%}  {fact}")


#: Published measurements the model was not set on (benchmarks/heldout/README.md).
HELD_OUT = Path(__file__).resolve().parent / "heldout"
#: The models of the held-out rows, from their config.json.
HELD_OUT_MODELS: dict[str, dict[str, Any]] = {
    "gpt_oss_120b": {
        "num_layers": 36,
        "hidden_size": 2880,
        "ffn_hidden_size": 2880,
        "num_attention_heads": 64,
        "num_kv_heads": 8,
        "head_dim": 64,
        "num_experts": 128,
        "moe_ffn_hidden_size": 2880,
        "moe_router_topk": 4,
        "vocab_size": 201088,
        "tie_word_embeddings": False,
    }
}
HELD_OUT_MODELS |= {
    "llama2_13b": {
        "num_layers": 40,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_kv_heads": 40,
        "ffn_hidden_size": 13824,
        "vocab_size": 32000,
    },
    "llama2_70b": {
        "num_layers": 80,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "num_kv_heads": 8,
        "ffn_hidden_size": 28672,
        "vocab_size": 32000,
    },
}
#: Held-out models that areal-conf's table of known models has.
KNOWN_IDS = {
    "llama3_8b": "meta-llama/Llama-3.1-8B",
    "llama3_70b": "meta-llama/Llama-3.1-70B",
    "llama31_405b": "meta-llama/Llama-3.1-405B",
    "qwen3_30b_a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3_235b_a22b": "Qwen/Qwen3-235B-A22B",
}
#: torchtitan's activation checkpointing, as the model's recompute modes.
RECOMPUTE = {"no": "none", "selective op": "op", "full": "full"}
#: What Megatron-Bridge's performance recipes set that the tables do not print.
RECIPE_KNOBS: dict[str, Any] = {
    "overlap_grad_reduce": True,
    "overlap_param_gather": True,
    "gradient_accumulation_fusion": True,
    "distributed_optimizer": True,
    "grad_reduce_dtype": "bfloat16",
}
#: Megatron-Bridge's FP8 precisions as Transformer Engine's recipes.
FP8_RECIPE = {"fp8_cs": "tensorwise", "fp8_mx": "mxfp8"}


def held_out_rows(name: str = "megatron_bridge_bf16") -> list[Row]:
    """The rows of benchmarks/heldout/<name>.csv (Megatron-Bridge's performance
    summary), as the model takes them, with the settings the file gives per row."""
    rows = []
    with open(HELD_OUT / f"{name}.csv", newline="") as f:
        for r in csv.DictReader(f):
            n = {k: int(r[k]) for k in ("gpus", "gbs", "mbs", "seq", "tp", "pp", "cp", "ep")}
            dp = n["gpus"] // (n["tp"] * n["pp"] * n["cp"])
            dims = (("d", dp), ("p", n["pp"]), ("t", n["tp"]), ("c", n["cp"]), ("e", n["ep"]))
            spec = "megatron:" + "".join(f"{k}{v}" for k, v in dims if v > 1)
            tokens = n["gbs"] * n["seq"]
            measured = tokens / (float(r["tokens_per_s_per_gpu"]) * n["gpus"])
            knobs = {
                "tokens_per_step": tokens,
                "tokens_per_microbatch": n["mbs"] * n["seq"],
                "seq_len": n["seq"],
                "virtual_stages": int(r["vp"]),
                **RECIPE_KNOBS,
            }
            if "precision" in r:
                knobs["fp8"] = FP8_RECIPE[r["precision"]]
                knobs["fp8_param_gather"] = True  # both precisions' recipes set it
                knobs["tp_comm_overlap"] = r["tp_comm_overlap"] == "true"
                knobs["overlap_param_gather"] = r["overlap_param_gather"] == "true"
                knobs["dedup_dispatch"] = r["dispatcher"] == "flex"
            label = f"{r['model']} {r['system']} {r['release']} {r.get('precision', '')}".strip()
            known = known_model(KNOWN_IDS[r["model"]]) if r["model"] in KNOWN_IDS else None
            model = dict(known) if known is not None else HELD_OUT_MODELS[r["model"]]
            rows.append(
                Row(
                    name,
                    label,
                    label,
                    spec,
                    model,
                    r["gpu"],
                    measured,
                    0.0,
                    knobs,
                )
            )
    return rows


def torchtitan_rows() -> list[Row]:
    """The rows of benchmarks/heldout/torchtitan_a100_fsdp.csv, as the model takes them."""
    from areal_conf.model.known_models import known_model

    rows = []
    with open(HELD_OUT / "torchtitan_a100_fsdp.csv", newline="") as f:
        for r in csv.DictReader(f):
            gpus, batch, seq = int(r["gpus"]), int(r["local_batch"]), int(r["seq"])
            name = r["model"]
            known = known_model(KNOWN_IDS[name]) if name in KNOWN_IDS else None
            model = known if known is not None else HELD_OUT_MODELS[name]
            tokens = gpus * batch * seq
            label = f"{name} b{batch} {r['activation_checkpointing']}"
            knobs = {
                "tokens_per_step": tokens,
                "tokens_per_microbatch": batch * seq,
                "seq_len": seq,
                "recompute": RECOMPUTE[r["activation_checkpointing"]],
            }
            measured = tokens / (float(r["tokens_per_s_per_gpu"]) * gpus)
            rows.append(
                Row(
                    "torchtitan_a100_fsdp",
                    label,
                    label,
                    f"fsdp:d{gpus}",
                    dict(model),
                    "a100",
                    measured,
                    0.0,
                    knobs,
                )
            )
    return rows


#: Each layout sweep's network between nodes as its source states it, GB/s a GPU (8 a
#: node): vTrain's 800 Gb/s a node, BigScience's 4 Omni-Path links of 100 Gb/s a node;
#: Hagemann et al.'s DGX A100 (HDR 200 Gb/s a GPU) is the table's A100.
SWEEP_NETWORK = {"vtrain_micro24": 100 / 8, "bigscience_tr11_prequel": 50 / 8}


def sweep_rows(name: str = "layout_sweeps.csv") -> tuple[list[Row], dict[str, int]]:
    """The rows of benchmarks/heldout/``name`` as the model takes them, and the rows left
    out by reason (an MoE sweep that mixes code versions and dispatchers)."""
    rows: list[Row] = []
    left_out: dict[str, int] = defaultdict(int)
    with open(HELD_OUT / name, newline="") as f:
        for r in csv.DictReader(f):
            if r["source_id"] == "mcore_moe_modelzoo_qwen3":
                left_out["Qwen3-235B: mixed code versions (some held out on their own)"] += 1
                continue
            n = {k: int(r[k]) for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "seq_len")}
            dims = (("d", n["dp"]), ("p", n["pp"]), ("t", n["tp"]), ("c", n["cp"]))
            spec = "megatron:" + "".join(f"{k}{v}" for k, v in dims if v > 1)
            hidden, ffn = int(r["hidden"]), int(r["ffn_hidden"])
            gated = r["source_id"] == "hagemann2023_layouts"  # LLaMA; the GPTs a 4h MLP
            model = {
                "num_layers": int(r["layers"]),
                "hidden_size": hidden,
                "num_attention_heads": int(r["heads"]),
                "num_kv_heads": int(r["kv_heads"]),
                "ffn_hidden_size": ffn if gated else round(ffn * 2 / 3),
                "vocab_size": int(r["vocab"]),
                "max_seq_len": n["seq_len"],
            }
            flags = r["other_flags"]
            recompute = r["recompute"].split(" ")[0]
            knobs = {
                "tokens_per_step": int(r["global_batch_sequences"]) * n["seq_len"],
                "tokens_per_microbatch": n["micro_batch"] * n["seq_len"],
                "seq_len": n["seq_len"],
                "recompute": recompute if recompute in ("full", "selective") else "none",
                "sequence_parallel": "sequence_parallel=True" in flags,
                "flash_attention": "flash_attention" in flags,
                # Megatron-DeepSpeed's DDP in vTrain; ZeRO-1 (fp16) in BigScience's
                "distributed_optimizer": r["source_id"] != "vtrain_micro24",
                "grad_reduce_dtype": "float16" if r["precision"].startswith("fp16") else "float32",
            }
            gpu = HARDWARE["a100"]
            if r["source_id"] in SWEEP_NETWORK and n["tp"] * n["pp"] * n["dp"] > 8:
                gpu = dataclasses.replace(gpu, inter_node_gb_per_s=SWEEP_NETWORK[r["source_id"]])
            label = f"{spec.split(':')[1]} mb{n['micro_batch']}"
            rows.append(
                Row(
                    r["source_id"],
                    r["workload_id"],
                    label,
                    spec,
                    model,
                    gpu,
                    float(r["measured_value"]),
                    0.0,
                    knobs,
                )
            )
    return rows, left_out


def held_out_sweeps() -> None:
    """Per held-out layout sweep, how the model and the baseline rank its layouts and how
    far off their times are; vTrain's single-node sweeps (144 of them) by their means."""
    rows, left_out = sweep_rows()
    print("Held out, layout sweeps (benchmarks/heldout/layout_sweeps.md):")
    for reason, count in left_out.items():
        print(f"  left out: {count} rows, {reason}")
    _sweep_table(rows, each=True)
    print("vTrain's single-node sweeps (2-8 GPUs, small GPTs), by their means:")
    _sweep_table(sweep_rows("layout_sweeps_single_node.csv")[0], each=False)


def _sweep_table(rows: list[Row], *, each: bool) -> None:
    """Spearman, top-1 regret, median and worst error of the model and the baseline: per
    workload (``each``) and their means by source."""
    print(
        f"{'workload':40} {'rows':>4} {'Spearman':>13} {'top-1 regret':>13} {'median err':>13}"
        f" {'worst err':>13}"
    )
    print(f"{'':40} {'':4}" + " model   base" * 4)
    workloads: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        workloads[row.workload].append(row)
    by_source: dict[str, list[list[float]]] = defaultdict(list)

    def line(name: str, count: int, cells: list[float]) -> str:
        shown = (f"{c:6.2f}" if i < 4 else f"{c:6.0%}" for i, c in enumerate(cells))
        return f"{name[:40]:40} {count:4} " + " ".join(shown)

    for name, chosen in workloads.items():
        measured = [r.measured_s for r in chosen]
        times = {
            "model": [step_time(r.spec, r.model, gpu=r.gpu, **r.knobs).total for r in chosen],
            "base": [textbook_seconds(r) for r in chosen],
        }
        cells: list[float] = []
        cells += [spearman(measured, times[k]) for k in times]
        cells += [measured[times[k].index(min(times[k]))] / min(measured) for k in times]
        errors = {
            k: [abs(p / m - 1) for p, m in zip(v, measured, strict=True)] for k, v in times.items()
        }
        cells += [statistics.median(errors[k]) for k in times]
        cells += [max(errors[k]) for k in times]
        by_source[chosen[0].table].append(cells)
        if each:
            print(line(name, len(chosen), cells))
    print("mean by source (rows: its workloads)")
    for source, lines in by_source.items():
        print(line(source, len(lines), [statistics.mean(c) for c in zip(*lines, strict=True)]))


#: The Megatron-Core MoE Model Zoo's Qwen3-235B rows (layout_sweeps.csv): its model.
QWEN3_235B = "Qwen/Qwen3-235B-A22B"


def moe_zoo_rows() -> list[Row]:
    """The Model Zoo's Qwen3-235B rows on 256 H100 that the model can express, each with
    its own dispatcher (DeepEP sends a token to a node once). Left out: the Megatron-FSDP
    row (another data-parallel engine) and the one that overlaps the all-to-all with
    1F1B. Its selective recomputation (norms, the MoE activation) is not modelled."""
    rows: list[Row] = []
    with open(HELD_OUT / "layout_sweeps.csv", newline="") as f:
        for r in csv.DictReader(f):
            flags = r["other_flags"]
            if r["source_id"] != "mcore_moe_modelzoo_qwen3" or "FSDP=On" in flags:
                continue
            if "A2A overlap" in flags:
                continue
            n = {k: int(r[k]) for k in ("tp", "pp", "dp", "ep", "micro_batch", "seq_len")}
            settings = dict(item.split("=", 1) for item in flags.split(";") if "=" in item)
            edp = n["tp"] * n["dp"] // n["ep"]  # the expert grid's data-parallel size
            attn = f"d{n['dp']}p{n['pp']}t{n['tp']}"
            ffn = f"p{n['pp']}e{n['ep']}" + (f"d{edp}" if edp > 1 else "")
            known = known_model(QWEN3_235B)
            assert known is not None, "areal-conf's table of known models has Qwen3-235B"
            model: dict[str, Any] = {**known, "max_seq_len": n["seq_len"]}
            knobs = {
                "tokens_per_step": int(r["global_batch_sequences"]) * n["seq_len"],
                "tokens_per_microbatch": n["micro_batch"] * n["seq_len"],
                "seq_len": n["seq_len"],
                "virtual_stages": int(settings.get("VPP", 1)),
                "dedup_dispatch": settings.get("dispatcher") == "DeepEP",
                # the Model Zoo's recipes overlap and fuse as Megatron-Bridge's do
                **RECIPE_KNOBS,
            }
            label = f"{settings.get('dispatcher')} t{n['tp']}p{n['pp']}d{n['dp']}e{n['ep']}"
            rows.append(
                Row(
                    r["source_id"],
                    r["workload_id"],
                    label,
                    f"megatron:(attn:{attn}|ffn:{ffn})",
                    model,
                    "h100",
                    float(r["measured_value"]),
                    0.0,
                    knobs,
                )
            )
    return rows


def held_out() -> None:
    """Each held-out source, the model beside the baseline."""
    for source, rows in (
        ("Megatron-Bridge BF16", held_out_rows()),
        ("Megatron-Bridge FP8", held_out_rows("megatron_bridge_fp8")),
        ("torchtitan FSDP2 on A100", torchtitan_rows()),
        ("Megatron-Core MoE Model Zoo, Qwen3-235B on 256 H100", moe_zoo_rows()),
    ):
        _held_out_source(source, rows)
        print()


def _held_out_source(source: str, rows: list[Row]) -> None:
    print(f"Held out, {source} (benchmarks/heldout: the model was not set on these):")
    print(f"{'row':40} {'layout':18} {'measured s':>10} {'model':>7} {'baseline':>8}")
    errors: dict[str, list[float]] = {"model": [], "baseline": []}
    for row in rows:
        model = step_time(row.spec, row.model, gpu=row.gpu, **row.knobs).total
        baseline = textbook_seconds(row)
        errors["model"].append(abs(model / row.measured_s - 1))
        errors["baseline"].append(abs(baseline / row.measured_s - 1))
        print(
            f"{row.label:40} {row.spec.partition(':')[2]:18} {row.measured_s:10.2f} "
            f"{model / row.measured_s:7.2f} {baseline / row.measured_s:8.2f}"
        )
    print(
        f"{'median / worst relative error':59} "
        + " ".join(
            f"{name} {statistics.median(e):.0%} / {max(e):.0%}" for name, e in errors.items()
        )
    )


def beside_the_baseline() -> None:
    """Per table, the model's and the baseline's relative errors; per workload, their
    Spearman correlations and top-1 regrets."""
    rows = all_rows()
    model = {id(row): predict(row).total for row in rows}
    baseline = {id(row): textbook_seconds(row) for row in rows}
    print("Beside a textbook baseline (every table here is a calibration source):")
    print(f"{'table':27} {'rows':>4} {'median err':>21} {'worst err':>21}")
    print(f"{'':27} {'':4} {'model':>10} {'baseline':>10} {'model':>10} {'baseline':>10}")
    by_table: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        by_table[row.table].append(row)
    for table, chosen in by_table.items():
        errors = {
            name: [abs(seconds[id(r)] / r.measured_s - 1) for r in chosen]
            for name, seconds in (("model", model), ("baseline", baseline))
        }
        medians = [statistics.median(errors[n]) for n in ("model", "baseline")]
        worst = [max(errors[n]) for n in ("model", "baseline")]
        print(
            f"{table:27} {len(chosen):4} {medians[0]:10.1%} {medians[1]:10.1%} "
            f"{worst[0]:10.1%} {worst[1]:10.1%}"
        )
    print(f"{'workload':42} {'Spearman':>19} {'top-1 regret':>19}")
    print(f"{'':42} {'model':>9} {'baseline':>9} {'model':>9} {'baseline':>9}")
    workloads: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if row.table in ("narayanan2021_table2", "korthikanti2022_table5"):
            workloads[row.workload].append(row)
    for name, chosen in workloads.items():
        measured = [r.measured_s for r in chosen]
        cells = []
        for seconds in (model, baseline):
            predicted = [seconds[id(r)] for r in chosen]
            cells.append(spearman(measured, predicted))
        for seconds in (model, baseline):
            first = min(chosen, key=lambda r, s=seconds: s[id(r)])  # type: ignore[misc]
            cells.append(first.measured_s / min(measured))
        print(f"{name:42} " + " ".join(f"{c:9.3f}" for c in cells))


def speed() -> None:
    model = dict(DENSE_32B)
    spec = "megatron:d8p2t4"
    knobs: dict[str, Any] = {
        "gpu": "h100",
        "tokens_per_step": 1 << 21,
        "tokens_per_microbatch": 16384,
    }
    step_time(spec, model, **knobs)
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        step_time(spec, model, **knobs)
    per_call = (time.perf_counter() - start) / calls
    moe = {**model, "num_experts": 128, "moe_ffn_hidden_size": 1536, "moe_router_topk": 8}
    for label, shape in (("dense", model), ("MoE, 128 experts", moe)):
        start = time.perf_counter()
        ranked = rank_layouts("megatron", 1024, shape, **knobs)
        took = time.perf_counter() - start
        print(f"rank every megatron layout of 1024 GPUs ({label}): ", end="")
        print(f"{len(ranked)} layouts in {took:.3f} s")
    parsed = shape_of(model)
    start = time.perf_counter()
    for _ in range(calls):
        step_time(spec, parsed, **knobs)
    per_shape_call = (time.perf_counter() - start) / calls
    print(f"step_time: {per_call * 1e6:.1f} µs a call with a mapping, ", end="")
    print(f"{per_shape_call * 1e6:.1f} µs with a ModelShape (mean of {calls})")


def plan_column() -> None:
    """validate() of an AReaL 2.0 example with and without the s/step check, alternating
    rounds, best of each."""
    from unittest import mock

    from areal_conf import validation
    from areal_conf.command.argv import parse_config_command
    from areal_conf.command.check import compose_as_areal
    from areal_conf.rules import registry
    from areal_conf.settings import Settings

    root = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "areal2"
    command = parse_config_command(
        ["--config", "examples/math/gsm8k_grpo_megatron.yaml", "scheduler.type=local"], cwd=root
    )
    cfg = compose_as_areal(command)
    settings = Settings(areal_version="2.0")
    with_check = registry.rules_for("2.0")
    without = tuple(rule for rule in with_check if rule.id != "speed")
    assert len(without) == len(with_check) - 1
    best = {"with": float("inf"), "without": float("inf")}
    for _ in range(30):
        for label, rules in (("without", without), ("with", with_check)):
            with mock.patch.object(validation, "rules_for", lambda version, r=rules: r):
                start = time.perf_counter()
                for _ in range(20):
                    validation.validate(cfg, settings=settings)
            best[label] = min(best[label], (time.perf_counter() - start) / 20)
    added = best["with"] - best["without"]
    print(
        f"validate of gsm8k_grpo_megatron.yaml: {best['without'] * 1e3:.3f} ms without the "
        f"s/step column, {best['with'] * 1e3:.3f} ms with it (best of 30 rounds): "
        f"{added * 1e3:.3f} ms added, {best['with'] / best['without']:.2f}×"
    )


if __name__ == "__main__":
    tables()
    print()
    beside_the_baseline()
    print()
    held_out()
    print()
    held_out_sweeps()
    print()
    speed()
    plan_column()

"""Decode speed (``areal_conf.decode_throughput``) against published SGLang and vLLM
serving benchmarks, beside a textbook baseline. Every row is held out: no constant of
areal-conf was set from them.

The rows are ``benchmarks/heldout/decode.csv`` (sources and caveats in ``decode.md``
beside it). Compared per row: the time per output token (TPOT, the mean time between
two tokens of a request), which the benchmarks print for a run at a given concurrency,
against the predicted decode step of an instance with that many requests (the measured
mean concurrency where the source prints it), their prompts prefilled as finished
requests are replaced. A row is left out, with the reason, when areal-conf cannot say
what it measured: another engine, quantized weights or KV cache (areal-conf prices
bf16), speculative decoding, a model whose shape areal-conf does not know, a GPU it
does not know, no TPOT.

The textbook baseline (:func:`textbook_tpot`) is the memory roofline of a decode step:
an instance's active weights (bf16) and the KV cache of its requests read once from HBM
at the data sheet's bandwidth, split over the tensor-parallel GPUs; nothing else.

Per source and in all: the median and worst ratio of predicted to measured TPOT, and the
Spearman correlation over each workload's concurrency sweep (one model, GPU and lengths).

    python benchmarks/decode_heldout.py
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _perf_tables import active_parameters, spearman

from areal_conf import AllocationError, decode_throughput
from areal_conf.model.hardware import HARDWARE, Hardware
from areal_conf.model.known_models import known_model
from areal_conf.model.shape import ModelShape, model_shape
from areal_conf.perf.decode import RequestLengths
from areal_conf.perf.memory import kv_bytes_per_token

ROWS = Path(__file__).resolve().parent / "heldout" / "decode.csv"

#: The rows' models as areal-conf's table of known models names them.
MODELS = {
    "Llama-3.1-70B": "meta-llama/Llama-3.1-70B",
    "Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
    "Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen3-235B-A22B-Instruct-2507": "Qwen/Qwen3-235B-A22B",
    "Mixtral-8x7B": "mistralai/Mixtral-8x7B-v0.1",
}
#: The rows' GPUs by the start of their name.
GPUS = {"A100": "a100", "H100": "h100", "H200": "h200", "H20": "h20", "B200": "b200"}


def _gpu(text: str) -> Hardware | None:
    for prefix, name in GPUS.items():
        if text.startswith(prefix) and not text.startswith(prefix + "0"):  # H20 vs H200
            return HARDWARE[name]
    return None


def left_out(row: dict[str, str]) -> str:
    """Why a row cannot be predicted ("" when it can)."""
    engine = row["engine"].lower()
    if engine not in ("sglang", "vllm"):
        return f"engine {row['engine']}"
    if not row["dtype"].startswith("bf16") or "fp8" in row["dtype"]:
        return f"quantized ({row['dtype'][:30]})"
    if row["spec_decode"] != "no":
        return "speculative decoding"
    if row["model"] not in MODELS:
        return f"model {row['model']} not in areal-conf's table"
    if _gpu(row["gpu"]) is None:
        return f"GPU {row['gpu'][:20]}"
    if not row["tpot_ms"]:
        return "no TPOT"
    if int(row["pp"] or 1) > 1 or int(row["ep"] or 1) > 1 or int(row["dp"] or 1) > 1:
        return "pipeline, expert or attention data parallelism"
    return ""


def _shape(row: dict[str, str]) -> ModelShape:
    shape = model_shape(known_model(MODELS[row["model"]]) or {})
    assert isinstance(shape, ModelShape)
    return shape


def _concurrency(row: dict[str, str]) -> int:
    measured = row["measured_mean_concurrency"]
    return max(1, round(float(measured))) if measured else int(float(row["concurrency"]))


def predicted_tpot(row: dict[str, str]) -> float:
    """The predicted decode step of an instance, in ms."""
    prompt, response = round(float(row["input_len"])), round(float(row["output_len"]))
    gpu = _gpu(row["gpu"])
    assert gpu is not None
    found = decode_throughput(
        f"{row['engine'].lower()}:t{int(row['tp'])}",
        _shape(row),
        gpu=gpu,
        concurrent=_concurrency(row),
        context_tokens=prompt + response // 2,
        requests=RequestLengths(prompt, max(1, response)),
    )
    return found.step_s * 1e3


def textbook_tpot(row: dict[str, str]) -> float:
    """The memory roofline of a decode step, in ms (see the module docstring)."""
    shape, gpu, tp = _shape(row), _gpu(row["gpu"]), int(row["tp"])
    assert gpu is not None
    prompt, response = float(row["input_len"]), float(row["output_len"])
    weights = 2 * active_parameters(shape) / tp
    kv = _concurrency(row) * (prompt + response / 2) * kv_bytes_per_token(shape, tp, 1)
    return (weights + kv) / (gpu.hbm_tb_per_s * 1e12) * 1e3


def main() -> None:
    rows = list(csv.DictReader(ROWS.open(encoding="utf-8")))
    kept = [r for r in rows if not left_out(r)]
    reasons: dict[str, int] = defaultdict(int)
    for r in rows:
        if left_out(r):
            reasons[left_out(r)] += 1
    print(f"{len(rows)} rows, {len(kept)} predicted; left out:")
    for reason, n in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"  {n:3d}  {reason}")
    print()
    header = f"{'source':22} {'model':30} {'gpu':5} {'tp':>2} {'in':>5} {'out':>5} {'conc':>4}"
    print(f"{header} {'TPOT ms':>8} {'model':>6} {'base':>6}")
    by_source: dict[str, list[tuple[float, float]]] = defaultdict(list)
    sweeps: dict[tuple[str, ...], list[tuple[float, float, float]]] = defaultdict(list)
    for r in kept:
        measured = float(r["tpot_ms"])
        try:
            model = predicted_tpot(r) / measured
        except AllocationError as err:
            print(f"  {r['source_id']} {r['model']}: {err.reason}")
            continue
        base = textbook_tpot(r) / measured
        by_source[r["source_id"]].append((model, base))
        key = (r["source_id"], r["engine"], r["model"], r["gpu"], r["tp"], r["dataset"])
        sweeps[key].append((measured, model * measured, base * measured))
        gpu = _gpu(r["gpu"])
        print(
            f"{r['source_id'][:22]:22} {r['model'][:30]:30} {gpu.name[:5] if gpu else '':5} "
            f"{r['tp']:>2} {float(r['input_len']):5.0f} {float(r['output_len']):5.0f} "
            f"{_concurrency(r):4d} {measured:8.2f} {model:6.2f} {base:6.2f}"
        )
    print("\npredicted over measured TPOT (1 = exact)")
    columns = f"{'rows':>4} {'median model':>13} {'base':>6} {'worst model':>12} {'base':>6}"
    print(f"{'source':24} {columns}")
    everything: list[tuple[float, float]] = []
    for source, pairs in sorted(by_source.items()):
        everything += pairs
        _summary(source, pairs)
    _summary("all", everything)
    print("\nSpearman over each concurrency sweep (3 rows or more)")
    for sweep, points in sorted(sweeps.items()):
        if len(points) < 3:
            continue
        times = [p[0] for p in points]
        name = f"{sweep[2]} {sweep[5]}"[:60]
        print(
            f"  {name:60} model {spearman(times, [p[1] for p in points]):5.2f}"
            f"  base {spearman(times, [p[2] for p in points]):5.2f}"
        )


def _summary(source: str, pairs: list[tuple[float, float]]) -> None:
    def worst(values: list[float]) -> float:
        return max(values, key=lambda v: abs(math.log(v)))

    model, base = [p[0] for p in pairs], [p[1] for p in pairs]
    print(
        f"{source[:24]:24} {len(pairs):4d} {statistics.median(model):13.2f} "
        f"{statistics.median(base):6.2f} {worst(model):12.2f} {worst(base):6.2f}"
    )


if __name__ == "__main__":
    main()
